#!/usr/bin/env python3
"""The engine's module graph, and the layering rules it must keep.

Prints one line per engine module with the engine modules it uses, then
checks (exit 1 on any failure):
  - no import cycle between the engine's modules (each file a module; a
    folder's mod.rs is the folder), test modules left out;
  - the engine never uses the HTTP layer, config or metrics, and never axum;
  - only the storage layer uses object_store; storage never uses the engine
    or the HTTP layer;
  - the HTTP layer never uses the engine's codecs.

    scripts/module-graph.py [--dot]
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_of(path: Path) -> tuple:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def strip_tests(text: str) -> str:
    """Drop `#[cfg(test)] mod tests { ... }` blocks and comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def references(module: tuple, is_dir_mod: bool, text: str):
    """Absolute module paths (as tuples of segments) that `text` names."""
    base = module if is_dir_mod else module[:-1]  # what `super` is relative to, minus one
    found = []

    def resolve(head, segs):
        if head == "crate":
            return tuple(segs)
        if head == "self":
            return module + tuple(segs)
        # super: the parent of this module
        return module[:-1] + tuple(segs)

    for m in USE_GROUP_RE.finditer(text):
        head, prefix = m.group(1), [s for s in m.group(2).split("::") if s]
        for item in re.split(r",", m.group(3)):
            item = item.strip().split(" as ")[0].strip()
            if not item or item == "self":
                found.append(resolve(head, prefix))
                continue
            segs = [s for s in re.split(r"::|\{", item) if s.strip()]
            found.append(resolve(head, prefix + [segs[0].strip()] + ([segs[1].strip()] if len(segs) > 1 else [])))
    text = USE_GROUP_RE.sub("", text)
    for m in PATH_RE.finditer(text):
        segs = [s for s in m.group(2).split("::") if s]
        found.append(resolve(m.group(1), segs))
    del base
    return found


def main() -> int:
    files = sorted(SRC.rglob("*.rs"))
    modules = {module_of(f): f for f in files}
    deps = {}
    external = {}
    for f in files:
        mod = module_of(f)
        text = strip_tests(f.read_text())
        is_dir = f.name == "mod.rs"
        targets = set()
        for ref in references(mod, is_dir, text):
            # The longest module that prefixes the reference.
            for n in range(len(ref), 0, -1):
                if ref[:n] in modules:
                    if ref[:n] != mod:
                        targets.add(ref[:n])
                    break
        deps[mod] = targets
        external[mod] = set(re.findall(r"\b(axum|object_store|tower_http|hyper)::", text))

    engine = {m for m in modules if m[:1] == ("engine",) and len(m) > 1}
    failures = []

    # Edges between engine modules; a reference to a module's ancestor
    # (a folder's mod.rs, which only declares and re-exports) is not an edge.
    graph = {m: {t for t in deps[m] if t in engine and m[: len(t)] != t} for m in engine}
    for m in sorted(graph):
        print(f"{'::'.join(m)} -> {', '.join('::'.join(t) for t in sorted(graph[m])) or '-'}")

    # Cycles (Tarjan's strongly connected components).
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    for comp in sccs:
        failures.append("import cycle: " + " <-> ".join("::".join(c) for c in sorted(comp)))

    for m, targets in deps.items():
        layer = m[0] if m else ""
        for t in targets:
            if layer == "engine" and t[0] in ("http", "config", "metrics"):
                failures.append(f"{'::'.join(m)} (engine) uses {'::'.join(t)}")
            if layer == "storage" and t[0] in ("engine", "http"):
                failures.append(f"{'::'.join(m)} (storage) uses {'::'.join(t)}")
            if layer == "http" and t[:2] in (("engine", "codec"), ("engine", "decode_pool")):
                failures.append(f"{'::'.join(m)} (http) uses {'::'.join(t)}")
        for crate in external[m]:
            if crate == "object_store" and layer != "storage":
                failures.append(f"{'::'.join(m)} uses object_store (only storage may)")
            if crate in ("axum", "tower_http", "hyper") and layer in ("engine", "storage"):
                failures.append(f"{'::'.join(m)} ({layer}) uses {crate}")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(engine)} engine modules, {sum(len(v) for v in graph.values())} edges, "
          f"{len(failures)} layering failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
