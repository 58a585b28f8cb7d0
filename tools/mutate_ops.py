"""Mutants by operator, found by parsing the current sources (tools/mutate.py
--operators): no pattern list to keep up to date.

C files (src/**/*.c, src/**/*.h) are scanned with comments and preprocessor lines
masked out and each string or character literal one token that is never
mutated itself; Python files (numthunk/*.py)
are read with ast and tokenize, so that no comment, string or docstring is
ever mutated. Operators:

  rel        relational flips: < <=, > >=, == !=  (Python: also is / is not,
             in / not in)
  const      off-by-one constants in comparisons: an integer literal, or (C)
             an upper-case named limit in an ordering comparison, +1 and -1
  cond       a dropped branch of && / || (Python: and / or): A && B -> A, B
  swap       && <-> || (Python: and <-> or)
  not        a dropped ! (Python: not)
  cast       (C) a dropped cast: (uint8_t)x -> x; (Python) int(x), bool(x),
             float(x), str(x), tuple(x) -> x
  kwarg      (Python) a dropped keyword argument of a call
  ref        (C) a dropped new reference: Py_NewRef(x) -> x

Each mutant is one edit of one line: (file, offsets, original text,
replacement), with the enclosing function for the report. The list is
deterministic for a given tree; tools/mutate.py samples it with a seed.
"""

import ast
import io
import os
import re
import tokenize

# ---------------------------------------------------------------------------
# C


def c_mask(text):
    """text with comments and preprocessor lines replaced by spaces, and
    string and char literals by '$'s (newlines kept): offsets stay those of
    the source."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True

    def blank(a, b, fill=" "):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = fill

    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            # a directive, with its continuation lines
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                if text.startswith("/*", j):      # a comment inside: to its end
                    e = text.find("*/", j + 2)
                    j = n if e < 0 else e + 2
                    continue
                j += 1
            blank(i, j)
            i = j
            continue
        line_start = False
        if c == "\n":
            line_start = True
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            # a literal stays one token ('$'s, lexed as "lit"): an operand
            # that ends in one ends with it
            blank(i, min(j + 1, n), "$")
            i = j + 1
        else:
            i += 1
    return "".join(out)


_C_TOKEN = re.compile(r"""
    (?P<lit>\$+)
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[uUlLfF]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>=?:;,.(){}\[\]])
""", re.X)

C_TYPE_WORDS = {"int", "char", "short", "long", "unsigned", "signed", "double", "float",
                "void", "bool", "_Bool", "const", "volatile", "struct", "union", "enum"}
C_KEYWORDS = C_TYPE_WORDS | {"if", "else", "for", "while", "do", "return", "switch", "case",
                             "default", "break", "continue", "goto", "sizeof", "_Alignof",
                             "static", "extern", "inline", "typedef", "_Static_assert",
                             "_Thread_local", "_Atomic"}


def c_tokens(masked):
    """[(kind, text, start, end)] of the masked text."""
    return [(m.lastgroup, m.group(), m.start(), m.end()) for m in _C_TOKEN.finditer(masked)]


def _is_type_name(word):
    return (word in C_TYPE_WORDS or word.endswith("_t") or word.startswith("Py")
            or re.match(r"^(nt_|npy_|ffi_)\w+$", word) is not None
            or re.match(r"^[A-Z][a-z]\w*$", word) is not None)


def c_functions(toks):
    """[(start, end, name)]: the top-level brace blocks (function bodies,
    initialisers, struct definitions) and their names."""
    out = []
    depth = 0
    start = name = None
    for k, (_kind, text, s, e) in enumerate(toks):
        if text == "{":
            if depth == 0:
                start, name = s, None
                j, pdepth = k - 1, 0
                while j >= 0 and toks[j][1] not in (";", "}") and name is None:
                    t = toks[j][1]
                    if t == ")":
                        pdepth += 1
                    elif t == "(":
                        pdepth -= 1
                        if pdepth == 0 and j > 0 and toks[j - 1][0] == "id" \
                                and toks[j - 1][1] not in C_KEYWORDS:
                            name = toks[j - 1][1]
                    elif t == "=" and pdepth == 0:
                        jj = j - 1
                        while jj >= 0 and toks[jj][0] != "id":
                            jj -= 1
                        name = toks[jj][1] if jj >= 0 else None
                    elif toks[j][0] == "id" and j > 0 and toks[j - 1][1] in ("struct", "union",
                                                                              "enum"):
                        name = f"{toks[j - 1][1]} {t}"
                    j -= 1
            depth += 1
        elif text == "}":
            depth -= 1
            if depth == 0 and start is not None:
                out.append((start, e, name or "?"))
                start = None
    return out


_STOP_AND = {"&&", "||", "?", ":", ",", "=", ";", "{", "}", "return"}
_STOP_OR = {"||", "?", ":", ",", "=", ";", "{", "}", "return"}


def _operand_span(toks, k, direction, stops):
    """Token index range (a, b) of the operand of the binary operator at
    toks[k] on one side, at the same bracket depth; None if empty."""
    opening = ("(", "[") if direction > 0 else (")", "]")
    closing = (")", "]") if direction > 0 else ("(", "[")
    depth = 0
    j = k + direction
    last = None
    while 0 <= j < len(toks):
        t = toks[j][1]
        if t in opening:
            depth += 1
        elif t in closing:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (t in stops or (t.endswith("=") and t not in ("==", "!=", "<=",
                                                                          ">="))):
            break
        last = j
        j += direction
    if last is None:
        return None
    return (k + 1, last) if direction > 0 else (last, k - 1)


def c_mutants(path, text):
    masked = c_mask(text)
    toks = c_tokens(masked)
    funcs = c_functions(toks)
    out = []

    def func_at(pos):
        for s, e, name in funcs:
            if s <= pos < e:
                return name
        return "(file scope)"

    def add(op, start, end, repl, desc):
        if text[start:end] == repl:
            return
        out.append(dict(file=path, op=op, start=start, end=end, orig=text[start:end],
                        repl=repl, desc=desc, func=func_at(start)))

    rel_flip = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
    for k, (kind, t, s, e) in enumerate(toks):
        prev = toks[k - 1] if k > 0 else None
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if kind != "op":
            if kind == "id" and t == "Py_NewRef" and nxt is not None and nxt[1] == "(":
                close = _matching(toks, k + 1)
                if close is not None:
                    inner = text[nxt[3]:toks[close][2]]
                    add("ref", s, toks[close][3], inner, "a new reference dropped")
            continue
        if t in rel_flip:
            add("rel", s, e, rel_flip[t], f"{t} -> {rel_flip[t]}")
            for side in (nxt, prev):
                if side is None:
                    continue
                if side is nxt and side[1] in ("0", "NULL") and prev is not None \
                        and prev[1] == ")" and t in ("<", "==", "!="):
                    # f(...) < 0, f(...) == NULL: a status check of a call;
                    # moving the constant only ignores a failure no test can
                    # cause (an allocation that fails): left to the rel flip
                    continue
                if side[0] == "num" and re.match(r"^(0[xX][0-9a-fA-F]+|\d+)[uUlL]*$", side[1]):
                    lit = side[1]
                    body = lit.rstrip("uUlL")
                    suffix = lit[len(body):]
                    value = int(body, 0)
                    for d in (1, -1):
                        v = value + d
                        if v < 0:
                            rep = f"({v})"
                        else:
                            rep = (hex(v) if body.lower().startswith("0x") else str(v)) + suffix
                        add("const", side[2], side[3], rep, f"constant {lit} -> {rep}")
                elif (side[0] == "id" and t in ("<", "<=", ">", ">=")
                      and re.match(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$", side[1])
                      and side[1] not in ("NULL",)):
                    for d in ("+ 1", "- 1"):
                        rep = f"({side[1]} {d})"
                        add("const", side[2], side[3], rep, f"limit {side[1]} -> {rep}")
        elif t in ("&&", "||"):
            stops = _STOP_AND if t == "&&" else _STOP_OR
            left = _operand_span(toks, k, -1, stops)
            right = _operand_span(toks, k, +1, stops)
            if left is None or right is None:
                continue
            ls, le = toks[left[0]][2], toks[left[1]][3]
            rs, re_ = toks[right[0]][2], toks[right[1]][3]
            add("cond", ls, re_, text[ls:le], f"'{t} right' branch dropped")
            add("cond", ls, re_, text[rs:re_], f"'left {t}' branch dropped")
            other = "||" if t == "&&" else "&&"
            add("swap", s, e, other, f"{t} -> {other}")
        elif t == "!":
            add("not", s, e, "", "! dropped")
        elif t == "(" and nxt is not None and (prev is None or prev[0] != "id"
                                                or prev[1] in ("return", "case")):
            close = _matching(toks, k)
            if close is None or close + 1 >= len(toks):
                continue
            inner = [x[1] for x in toks[k + 1:close]]
            after = toks[close + 1]
            if not inner or any(w not in C_TYPE_WORDS and w != "*" and not _is_type_name(w)
                                for w in inner):
                continue
            if inner == ["void"] or after[1] in ("{", ")", ";", ",", "=", "?", ":"):
                continue
            if after[0] not in ("id", "num") and after[1] not in ("(", "&", "*", "-", "~", "!"):
                continue
            add("cast", s, toks[close][3], "", f"cast {text[s:toks[close][3]]} dropped")
    return out


def _matching(toks, k):
    depth = 0
    for j in range(k, len(toks)):
        if toks[j][1] == "(":
            depth += 1
        elif toks[j][1] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


# ---------------------------------------------------------------------------
# Python


_PY_FLIP = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
            ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
            ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
            ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
_PY_CASTS = {"int", "bool", "float", "str", "tuple"}


def py_mutants(path, text):
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def off(lineno, col):
        # ast columns are UTF-8 byte offsets
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode()[:col].decode(errors="replace"))

    # tokenize counts columns in characters
    tok_pos = [(starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1], t)
               for t in tokenize.generate_tokens(io.StringIO(text).readline)
               if t.type in (tokenize.OP, tokenize.NAME)]

    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def func_of(node):
        names = []
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
        return ".".join(reversed(names)) or "(module)"

    out = []

    def span(node):
        return off(node.lineno, node.col_offset), off(node.end_lineno, node.end_col_offset)

    def add(node, op, start, end, repl, desc):
        if text[start:end] == repl:
            return
        out.append(dict(file=path, op=op, start=start, end=end, orig=text[start:end],
                        repl=repl, desc=desc, func=func_of(node)))

    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(body[0].value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            prev = node.left
            for op, comp in zip(node.ops, node.comparators):
                a = span(prev)[1]
                b = span(comp)[0]
                optoks = [(s, e, t) for s, e, t in tok_pos if a <= s and e <= b
                          and t.string not in ("(", ")")]
                if optoks:
                    s0, e0 = optoks[0][0], optoks[-1][1]
                    old, new = _PY_FLIP[type(op)]
                    add(node, "rel", s0, e0, new, f"{old} -> {new}")
                for side in (comp, prev):
                    if isinstance(side, ast.Constant) and type(side.value) is int:
                        cs, ce = span(side)
                        for d in (1, -1):
                            add(node, "const", cs, ce, str(side.value + d),
                                f"constant {side.value} -> {side.value + d}")
                prev = comp
        elif isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            s, e = span(node)
            segs = [text[slice(*span(v))] for v in node.values]
            for i in range(len(node.values)):
                rest = segs[:i] + segs[i + 1:]
                repl = rest[0] if len(rest) == 1 else "(" + f" {word} ".join(rest) + ")"
                add(node, "cond", s, e, repl, f"operand {i + 1} of '{word}' dropped")
            other = "or" if word == "and" else "and"
            add(node, "swap", s, e, "(" + f" {other} ".join(segs) + ")", f"{word} -> {other}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            s, e = span(node)
            add(node, "not", s, e, "(" + text[slice(*span(node.operand))] + ")", "not dropped")
        elif isinstance(node, ast.Call):
            items = sorted(list(node.args) + list(node.keywords),
                           key=lambda x: (x.lineno, x.col_offset))
            for idx, kw in enumerate(items):
                if not isinstance(kw, ast.keyword) or kw.arg is None:
                    continue
                ks, ke = span(kw)
                if idx > 0:
                    ks = span(items[idx - 1])[1]
                elif idx + 1 < len(items):
                    ke = span(items[idx + 1])[0]
                add(node, "kwarg", ks, ke, "", f"keyword {kw.arg}= dropped")
            if (isinstance(node.func, ast.Name) and node.func.id in _PY_CASTS
                    and len(node.args) == 1 and not node.keywords
                    and not isinstance(node.args[0], ast.Starred)):
                s, e = span(node)
                add(node, "cast", s, e, "(" + text[slice(*span(node.args[0]))] + ")",
                    f"{node.func.id}() dropped")
    # never inside a docstring (ast nodes above never are, this is a guard)
    spans = [span(d) for d in docstrings]
    return [m for m in out if not any(s <= m["start"] < e for s, e in spans)]


# ---------------------------------------------------------------------------


def source_files(root):
    """Every C file of src/ and Python file of numthunk/, sorted."""
    out = []
    for d, exts in (("src", (".c", ".h")), ("numthunk", (".py",))):
        base = os.path.join(root, d)
        for sub, _, names in sorted(os.walk(base)):
            rel = os.path.relpath(sub, root).replace(os.sep, "/")
            out += [f"{rel}/{name}" for name in sorted(names) if name.endswith(exts)]
    return sorted(out)


def _one_line(text):
    return " ".join(text.split())


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def generate(root, files=None):
    """Every operator mutant of the tree at root, in a fixed order, each
    with an id (file:line:col:op:n)."""
    mutants = []
    for rel in files or source_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        found = c_mutants(rel, text) if rel.endswith((".c", ".h")) else py_mutants(rel, text)
        seen = set()
        for m in sorted(found, key=lambda m: (m["start"], m["end"], m["op"], m["repl"])):
            key = (m["start"], m["end"], m["repl"])
            if key in seen:
                continue
            seen.add(key)
            ls = text.rfind("\n", 0, m["start"]) + 1
            le = text.find("\n", m["end"])
            le = len(text) if le < 0 else le
            m["line"] = line_of(text, m["start"])
            m["col"] = m["start"] - ls + 1
            m["old_line"] = _one_line(text[ls:le])
            m["new_line"] = _one_line(text[ls:m["start"]] + m["repl"] + text[m["end"]:le])
            m["id"] = f"{rel}:{m['line']}:{m['col']}:{m['op']}:{len(seen)}"
            mutants.append(m)
    return mutants


def plant(text, m):
    """(new text, None), or (None, why) when the file no longer has the
    original text at the mutant's offsets."""
    if text[m["start"]:m["end"]] != m["orig"]:
        return None, "the source changed since the mutants were generated"
    return text[:m["start"]] + m["repl"] + text[m["end"]:], None
