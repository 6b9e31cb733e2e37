#!/usr/bin/env python3
"""The public API of a crate as a sorted listing, one item per line, from rustdoc's JSON output.

    scripts/public-api.py CRATE.json            # print the listing
    scripts/public-api.sh [--check|--write]     # build the JSON (nightly) and compare/update
                                                # docs/public-api/<crate>.txt

Every item reachable by a user: modules, re-exports (listed under the path a user writes),
structs with their public fields, enums with their variants, traits with their items, functions
and methods with their signatures, constants, statics, type aliases, macros, and each type's
trait implementations (auto traits such as Send and Sync included: losing one breaks users).
Blanket implementations are left out (they follow from the others). A change to any of these
changes the listing, so an API change shows up as a diff of docs/public-api/ in review.
"""
import json
import sys


def render_path(p):
    name = p.get("path") or p.get("name") or "?"
    return name + render_args(p.get("args"))


def render_args(args):
    if not args:
        return ""
    if "angle_bracketed" in args:
        a = args["angle_bracketed"]
        parts = []
        for g in a.get("args", []):
            if "type" in g:
                parts.append(ty(g["type"]))
            elif "lifetime" in g:
                parts.append(g["lifetime"])
            elif "const" in g:
                parts.append(str(g["const"].get("expr", "_")))
            else:
                parts.append("_")
        for c in a.get("constraints", []):
            binding = c.get("binding", {})
            if "equality" in binding:
                eq = binding["equality"]
                parts.append(f"{c['name']} = {ty(eq['type']) if 'type' in eq else eq}")
            elif "constraint" in binding:
                parts.append(f"{c['name']}: {bounds(binding['constraint'])}")
        return f"<{', '.join(parts)}>" if parts else ""
    if "parenthesized" in args:
        p = args["parenthesized"]
        out = f"({', '.join(ty(t) for t in p.get('inputs', []))})"
        if p.get("output"):
            out += f" -> {ty(p['output'])}"
        return out
    return ""


def bounds(bs):
    out = []
    for b in bs or []:
        if "trait_bound" in b:
            t = b["trait_bound"]
            mod = {"maybe": "?", "maybe_const": "~const "}.get(t.get("modifier"), "")
            hrtb = t.get("generic_params") or []
            pre = f"for<{', '.join(g['name'] for g in hrtb)}> " if hrtb else ""
            out.append(pre + mod + render_path(t["trait"]))
        elif "outlives" in b:
            out.append(b["outlives"])
        else:
            out.append(json.dumps(b, sort_keys=True))
    return " + ".join(out)


def ty(t):
    if t is None:
        return "()"
    (kind, v), = t.items() if isinstance(t, dict) else (("raw", t),)
    if kind == "resolved_path":
        return render_path(v)
    if kind == "generic" or kind == "primitive":
        return v
    if kind == "borrowed_ref":
        lt = (v.get("lifetime") + " ") if v.get("lifetime") else ""
        return f"&{lt}{'mut ' if v.get('is_mutable') else ''}{ty(v['type'])}"
    if kind == "raw_pointer":
        return f"*{'mut' if v.get('is_mutable') else 'const'} {ty(v['type'])}"
    if kind == "slice":
        return f"[{ty(v)}]"
    if kind == "array":
        return f"[{ty(v['type'])}; {v['len']}]"
    if kind == "tuple":
        return f"({', '.join(ty(x) for x in v)})"
    if kind == "impl_trait":
        return f"impl {bounds(v)}"
    if kind == "dyn_trait":
        traits = " + ".join(render_path(x["trait"]) for x in v.get("traits", []))
        lt = f" + {v['lifetime']}" if v.get("lifetime") else ""
        return f"dyn {traits}{lt}"
    if kind == "qualified_path":
        trait = render_path(v["trait"]) if v.get("trait") else "?"
        return f"<{ty(v['self_type'])} as {trait}>::{v['name']}{render_args(v.get('args'))}"
    if kind == "function_pointer":
        sig = v.get("sig", {})
        ins = ", ".join(ty(x[1]) for x in sig.get("inputs", []))
        out = f" -> {ty(sig['output'])}" if sig.get("output") else ""
        return f"fn({ins}){out}"
    if kind == "infer":
        return "_"
    return json.dumps(t, sort_keys=True)


def generics(g, with_where=True):
    if not g:
        return "", ""
    params = []
    for p in g.get("params", []):
        k = p["kind"]
        if "lifetime" in k:
            o = k["lifetime"].get("outlives") or []
            params.append(p["name"] + (f": {' + '.join(o)}" if o else ""))
        elif "type" in k:
            if k["type"].get("is_synthetic"):
                continue
            b = bounds(k["type"].get("bounds"))
            d = k["type"].get("default")
            params.append(p["name"] + (f": {b}" if b else "") + (f" = {ty(d)}" if d else ""))
        elif "const" in k:
            params.append(f"const {p['name']}: {ty(k['const']['type'])}")
    where = []
    for w in g.get("where_predicates", []) if with_where else []:
        if "bound_predicate" in w:
            bp = w["bound_predicate"]
            where.append(f"{ty(bp['type'])}: {bounds(bp.get('bounds'))}")
        elif "lifetime_predicate" in w:
            lp = w["lifetime_predicate"]
            where.append(f"{lp['lifetime']}: {' + '.join(lp.get('outlives', []))}")
        else:
            where.append(json.dumps(w, sort_keys=True))
    return (f"<{', '.join(params)}>" if params else ""), (f" where {', '.join(where)}" if where else "")


def function(name, f):
    h = f.get("header", {})
    quals = "".join(q for q, on in [("const ", h.get("is_const")), ("async ", h.get("is_async")),
                                     ("unsafe ", h.get("is_unsafe"))] if on)
    gp, wh = generics(f.get("generics"))
    sig = f["sig"]
    ins = ", ".join(f"{n}: {ty(t)}" if n != "self" else self_arg(t) for n, t in sig.get("inputs", []))
    out = f" -> {ty(sig['output'])}" if sig.get("output") else ""
    return f"{quals}fn {name}{gp}({ins}){out}{wh}"


def self_arg(t):
    if t == {"generic": "Self"}:
        return "self"
    if isinstance(t, dict) and "borrowed_ref" in t and t["borrowed_ref"]["type"] == {"generic": "Self"}:
        v = t["borrowed_ref"]
        lt = (v.get("lifetime") + " ") if v.get("lifetime") else ""
        return f"&{lt}{'mut ' if v.get('is_mutable') else ''}self"
    return f"self: {ty(t)}"


# Auto traits that only nightly has (their implementations would make the listing depend on the
# nightly that built it).
UNSTABLE_AUTO_TRAITS = {"Freeze", "UnsafeUnpin"}


def public(item):
    return item.get("visibility") == "public"


def main(path):
    doc = json.load(open(path))
    index = doc["index"]
    paths = doc.get("paths", {})
    root = index[str(doc["root"])]
    crate = root["name"]
    lines = set()
    seen_types = set()

    def item_of(i):
        return index.get(str(i))

    def impls_of(at, type_ids):
        for impl_id in type_ids:
            impl = item_of(impl_id)
            if impl is None:
                continue
            im = impl["inner"]["impl"]
            if im.get("blanket_impl") is not None:
                continue
            gp, wh = generics(im.get("generics"))
            neg = "!" if im.get("is_negative") else ""
            unsafe = "unsafe " if im.get("is_unsafe") else ""
            if im.get("trait") is None:
                for member_id in im.get("items", []):
                    member = item_of(member_id)
                    if member is None or not public(member):
                        continue
                    member_line(f"{at}::", member)
            else:
                trait = render_path(im["trait"])
                if trait in UNSTABLE_AUTO_TRAITS:
                    continue
                target = im["for"]
                args = render_args(target["resolved_path"].get("args")) if "resolved_path" in target else ""
                lines.add(f"{unsafe}impl{gp} {neg}{trait} for {at}{args}{wh}")

    def member_line(prefix, m):
        kind, v = next(iter(m["inner"].items()))
        name = prefix + (m["name"] or "?")
        if kind == "function":
            lines.add(f"pub {function(name, v)}")
        elif kind == "assoc_const":
            lines.add(f"pub const {name}: {ty(v.get('type'))}")
        elif kind == "assoc_type":
            lines.add(f"type {name}" + (f": {bounds(v.get('bounds'))}" if v.get("bounds") else "")
                      + (f" = {ty(v['type'])}" if v.get("type") else ""))
        else:
            lines.add(f"{kind} {name}")

    def visit(i, at, name=None, depth=0):
        item = item_of(i)
        if item is None:
            # An item of another crate re-exported here.
            p = paths.get(str(i))
            src = "::".join(p["path"]) if p else f"#{i}"
            lines.add(f"pub use {at}::{name} = {src}")
            return
        kind, v = next(iter(item["inner"].items()))
        name = name or item["name"]
        full = f"{at}::{name}" if at else name
        if kind == "module":
            lines.add(f"pub mod {full}")
            for c in v.get("items", []):
                ci = item_of(c)
                if ci is not None and (public(ci) or "use" in ci["inner"]) and depth < 20:
                    visit(c, full, None, depth + 1)
            return
        if kind == "use":
            if not public(item):
                return
            if v.get("is_glob"):
                target = item_of(v.get("id"))
                if target and "module" in target["inner"]:
                    for c in target["inner"]["module"]["items"]:
                        ci = item_of(c)
                        if ci is not None and public(ci):
                            visit(c, at, None, depth + 1)
                return
            if v.get("id") is None:
                lines.add(f"pub use {at}::{v['name']} = {v['source']}")
                return
            visit(v["id"], at, v["name"], depth + 1)
            return
        if kind == "struct":
            gp, wh = generics(v.get("generics"))
            sk = v["kind"]
            if sk == "unit":
                lines.add(f"pub struct {full}{gp};{wh}")
            elif "tuple" in sk:
                fields = [ty(item_of(f)["inner"]["struct_field"]) if f is not None else "_" for f in sk["tuple"]]
                lines.add(f"pub struct {full}{gp}({', '.join(fields)}){wh}")
            else:
                plain = sk["plain"]
                lines.add(f"pub struct {full}{gp}{wh}" + (" (some fields private)" if plain.get("has_stripped_fields") else ""))
                for f in plain.get("fields", []):
                    fi = item_of(f)
                    if fi and public(fi):
                        lines.add(f"pub {full}::{fi['name']}: {ty(fi['inner']['struct_field'])}")
            impls_of(full, v.get("impls", []))
        elif kind == "enum":
            gp, wh = generics(v.get("generics"))
            lines.add(f"pub enum {full}{gp}{wh}" + (" (some variants hidden)" if v.get("has_stripped_variants") else ""))
            for var in v.get("variants", []):
                vi = item_of(var)
                vk = vi["inner"]["variant"]["kind"]
                if vk == "plain":
                    lines.add(f"{full}::{vi['name']}")
                elif "tuple" in vk:
                    fields = [ty(item_of(f)["inner"]["struct_field"]) if f is not None else "_" for f in vk["tuple"]]
                    lines.add(f"{full}::{vi['name']}({', '.join(fields)})")
                else:
                    fs = [item_of(f) for f in vk["struct"]["fields"]]
                    inner = ", ".join(f"{f['name']}: {ty(f['inner']['struct_field'])}" for f in fs if f)
                    lines.add(f"{full}::{vi['name']} {{ {inner} }}")
            impls_of(full, v.get("impls", []))
        elif kind == "union":
            lines.add(f"pub union {full}")
            impls_of(full, v.get("impls", []))
        elif kind == "trait":
            gp, wh = generics(v.get("generics"))
            sup = f": {bounds(v.get('bounds'))}" if v.get("bounds") else ""
            lines.add(f"pub {'unsafe ' if v.get('is_unsafe') else ''}trait {full}{gp}{sup}{wh}")
            for m in v.get("items", []):
                mi = item_of(m)
                if mi:
                    member_line(f"{full}::", mi)
        elif kind == "function":
            lines.add(f"pub {function(full, v)}")
        elif kind == "constant":
            lines.add(f"pub const {full}: {ty(v.get('type'))} = {v.get('const', {}).get('expr', '?')}")
        elif kind == "static":
            lines.add(f"pub static {'mut ' if v.get('is_mutable') else ''}{full}: {ty(v.get('type'))}")
        elif kind == "type_alias":
            gp, wh = generics(v.get("generics"))
            lines.add(f"pub type {full}{gp} = {ty(v.get('type'))}{wh}")
        elif kind in ("macro", "proc_macro"):
            lines.add(f"macro {crate}::{name}!")
        else:
            lines.add(f"{kind} {full}")

    lines.add(f"pub mod {crate}")
    for c in root["inner"]["module"]["items"]:
        ci = item_of(c)
        if ci is not None and (public(ci) or "use" in ci["inner"]):
            visit(c, crate)
    for line in sorted(lines):
        print(line)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
