"""Apple arm64 assembly (clang -target aarch64-macos -S) carried to ELF.

The instructions stay as the compiler chose them for Apple's arm64 ABI;
only what is Mach-O's changes, so that GNU as for AArch64 Linux assembles
them and Apple-ABI code runs under qemu-aarch64 (tests/c/aarch64.sh):

- comments (';') and Mach-O-only directives (.build_version, .loh,
  .subsections_via_symbols, .cfi_*) go;
- a leading '_' of C names goes (Mach-O's global prefix);
- sections: __TEXT,__text is .text, other __TEXT sections .rodata,
  __DATA sections .data; `.zerofill __DATA,__common,_x,SIZE,LOG2` becomes
  SIZE zero bytes of .bss aligned to 2**LOG2;
- relocations: sym@PAGE is adrp's sym, sym@PAGEOFF is :lo12:sym, and the
  GOT forms sym@GOTPAGE, sym@GOTPAGEOFF are :got:sym, :got_lo12:sym.

    python tests/c/macho_to_elf.py IN.s OUT.s

Anything else Mach-O (another relocation form or directive, Apple's
vector syntax such as `mov.s v0[1], v1[0]`) is refused with its line,
rather than carried over wrong: tests/c/aarch64.sh compiles without
vectorizing, which leaves the calling convention as it is.
"""

import re
import sys

# a C name with Mach-O's underscore, not inside another word or a label
NAME = re.compile(r"(?<![\w.$])_([A-Za-z_][\w$]*)")
DROPPED = (
    ".build_version",
    ".loh",
    ".subsections_via_symbols",
    ".cfi_",
    ".data_region",
    ".end_data_region",
)
RELOCS = [
    (re.compile(r"(\w+)@GOTPAGEOFF"), r":got_lo12:\1"),
    (re.compile(r"(\w+)@GOTPAGE"), r":got:\1"),
    (re.compile(r"(\w+)@PAGEOFF"), r":lo12:\1"),
    (re.compile(r"(\w+)@PAGE"), r"\1"),
]


def strip_comment(line):
    """The line without its ';' comment (strings hold none here: -g0)."""
    if '"' in line:
        raise ValueError("a string in the assembly")
    return line.split(";", 1)[0].rstrip()


def section(args):
    seg, _, rest = args.partition(",")
    name = rest.split(",", 1)[0]
    if seg == "__TEXT":
        return ".text" if name == "__text" else ".section .rodata"
    if seg == "__DATA":
        return ".data"
    raise ValueError(f"section {args}")


def convert(lines):
    out = []
    current = ".text"
    for number, raw in enumerate(lines, 1):
        line = strip_comment(raw)
        word = line.split(None, 1)[0] if line.strip() else ""
        try:
            if not word or word.startswith(DROPPED):
                continue
            if word == ".section":
                current = section(line.split(None, 1)[1].replace(" ", ""))
                out.append("\t" + current)
                continue
            if word == ".zerofill":
                seg, _, name, size, align = line.split(None, 1)[1].replace(" ", "").split(",")
                name = NAME.sub(r"\1", name)
                out += [
                    "\t.pushsection .bss",
                    f"\t.balign {1 << int(align)}",
                    f"\t.type {name}, %object",
                    f"{name}:",
                    f"\t.zero {int(size)}",
                    f"\t.size {name}, {int(size)}",
                    "\t.popsection",
                ]
                continue
            if "." in word and not word.startswith((".", "b.")):
                raise ValueError("Apple's vector syntax (compile without vectorizing)")
            if "@" in line:
                for pattern, repl in RELOCS:
                    line = pattern.sub(repl, line)
                if "@" in line:
                    raise ValueError("a relocation form")
            line = NAME.sub(r"\1", line)
            out.append(line)
            if word == ".globl":
                # Mach-O has no symbol types; ELF's tell functions (the
                # globals of __text) from data
                name = line.split()[1]
                kind = "%function" if current == ".text" else "%object"
                out.append(f"\t.type {name}, {kind}")
        except (ValueError, IndexError) as exc:
            raise SystemExit(f"macho_to_elf: line {number}: {exc}: {raw.rstrip()}") from None
    return "\n".join(x for x in out if x) + "\n"


def main(argv):
    if len(argv) != 3:
        raise SystemExit("usage: macho_to_elf.py IN.s OUT.s")
    with open(argv[1]) as f:
        text = convert(f.read().splitlines())
    with open(argv[2], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv)
