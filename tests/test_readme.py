"""The README's opening example runs as printed, with the results its
comments claim."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_opening_example():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    claims = {}
    lines = []
    for line in block.splitlines():
        code, _, comment = line.partition("#")
        code = code.rstrip()
        m = re.match(r"\s*([\d.]+)\b", comment)
        if m and code.strip() in ("thunk()", "run(thunk)"):
            claims[code.strip()] = float(m.group(1))
            code = f"_results[{code.strip()!r}] = {code.strip()}"
        lines.append(code)
    namespace = {"_results": {}}
    exec(compile("\n".join(lines), "README.md", "exec"), namespace)
    assert claims == {"thunk()": 10.0, "run(thunk)": 109.0}
    assert namespace["_results"] == claims
