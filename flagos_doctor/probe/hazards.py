"""Findings about a real torch_fl: latent hazards, a machine without the device, the vendor branch.

Rules of :data:`flagos_doctor.probe.findings.RULES` (``rule(run) -> list[finding]``, one per
function, as there):

* ``latent-hazard`` (warning): stack code read a probe that the stack had replaced earlier,
  and decided from the replacement's answer. Here the original answers the same, so nothing
  goes wrong on this machine; where they differ (the seed bug: a box with a flagos device and
  no CUDA) the same read decides the other way. The finding names the reader, the write
  that replaced the probe, what the original answers here and the decision the other answer
  would have made (evaluated in the child, :mod:`.decisions`, where it can be). Reads of a
  saved original are a different probe and never fire it;
* ``no-device`` (error): the stack registered its device but ``device_count()`` answers 0.
  One finding that says so and lists what failed because of it, instead of a chain of
  exercise failures and a Triton driver that no backend would create;
* ``vendor-branch`` (info): which of torch_fl's vendor branches set ``GEMS_VENDOR``, and why.
"""

from __future__ import annotations

from flagos_doctor.probe.finding import Run, first_line, label, make_finding

#: torch_fl's vendor branches, by the GEMS_VENDOR value each one sets.
TORCH_FL_BRANCHES = {
    "ascend": "Ascend fallback", "nvidia": "NVIDIA CUDA", "metax": "MetaX", "hygon": "Hygon DCU",
    "enflame": "Enflame GCU", "mthreads": "Moore Threads MUSA",
}


def _says(answer: dict | None) -> str:
    if not answer:
        return "?"
    return answer["repr"] if answer.get("ok") else f"raises {answer['repr']}"


def latent_hazards(run: Run) -> list[dict]:
    """A replaced question probe read later, where both answers agree here."""
    document, facts = run.document, run.facts
    events = document.get("events", [])
    by_seq = {e["seq"]: e for e in events}
    saved = {s["saves"]: s for s in document.get("saved_originals", [])}
    groups: dict = {}
    for entry in facts.get("decisions") or []:
        if entry["original_answer"].get("repr") != entry["replaced_answer"].get("repr"):
            continue  # answers differ here: stale-guard and triton-driver say what went wrong
        decision = entry.get("decision") or {}
        key = (entry["probe"], entry["saw"], "triton" if decision.get("kind") == "triton-driver" else entry["file"], entry["line"]
               if decision.get("kind") != "triton-driver" else 0)
        groups.setdefault(key, []).append(entry)
    out = []
    for (probe, saw, _, _), entries in groups.items():
        write = by_seq.get(saw) or {}
        reads = [e for e in events if e["kind"] == "read" and e["probe"] == probe and e.get("saw") == saw
                 and any((e["where"].get("file"), e["where"].get("line")) == (x["file"], x["line"]) for x in entries)]
        readers = ", ".join(f"{label(e['where'])} (line {e['where'].get('line')})" for e in reads) or \
            ", ".join(f"{x['file']} line {x['line']}" for x in entries)
        first = entries[0]
        replaced_by = f"{label(write.get('where'))} (line {(write.get('where') or {}).get('line')})"
        value = (write.get("value") or {}).get("defined_at") or (write.get("value") or {}).get("repr")
        message = (
            f"{readers} read {probe} after {replaced_by} had replaced it (with {value}). Here the "
            f"replacement and the original both answer {_says(first['original_answer'])}, so the read "
            "decides as the original would; "
        )
        message += _otherwise(first)
        keep = saved.get(probe)
        if keep is not None:
            message += f" The original is saved as {keep['probe']} (#{keep['seq']}): read that instead."
        else:
            message += " Nothing keeps the original: save it before replacing it, and read that."
        evidence = [saw] + [e["seq"] for e in reads] + ([keep["seq"]] if keep else [])
        out.append(make_finding("latent-hazard", "warning", probe, message, evidence))
    return out


def _otherwise(entry: dict) -> str:
    """What the read would have decided with the other answer, in words."""
    decision = entry.get("decision") or {}
    other = not decision["answer"] if "answer" in decision and decision.get("kind") != "triton-driver" else decision.get("answer")
    if decision.get("kind") == "triton-driver" and decision.get("evaluated"):
        answers = ", ".join(f"{k}: {v}" for k, v in (decision.get("is_active") or {}).items())
        active = decision.get("active_backends") or []
        if len(active) == 1:
            result = f"Triton would create the {active[0]} backend's driver"
        else:
            result = f"Triton would have no driver ({len(active)} backends active)"
        return (f"had it answered {other}, Triton's backends would answer is_active() {answers}: {result} "
                "(evaluated here with the probe answering the other way).")
    if decision.get("evaluated"):
        now = (f"it takes {decision['now']}" if decision.get("now") is not None else
               f"this answer alone does not decide the test: {_rest_of_test(decision['statement'], entry['probe'])} "
               "decides which branch it takes")
        return (f"had it answered {other}, `{decision['statement']}` (line {decision['statement_line']}) would "
                f"take {decision['other']}; with {not other} {now}.")
    return f"what the other answer would decide cannot be evaluated here: {decision.get('why', 'no record')}."


def _rest_of_test(statement: str, probe: str) -> str:
    """The operands of an ``if``'s test other than the read: ``get_device_capability() >= (9, 0)``
    in ``if torch_device_fn.is_available() and get_device_capability() >= (9, 0):``."""
    import ast

    attr = probe.rpartition(".")[2]
    test = statement.strip()
    for head in ("if ", "while ", "... if "):
        if test.startswith(head):
            test = test[len(head):]
            break
    test = test.removesuffix(" else ...").removesuffix(":")
    try:
        expr = ast.parse(test, mode="eval").body
    except SyntaxError:
        return "the rest of the test"
    if not isinstance(expr, ast.BoolOp):
        return "the rest of the test"
    rest = [v for v in expr.values
            if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr
                       for n in ast.walk(v))]
    return " and ".join(f"`{ast.get_source_segment(test, v)}`" for v in rest) if rest else "the rest of the test"


def no_device(run: Run) -> list[dict]:
    """The device is registered, and there is none."""
    document, facts = run.document, run.facts
    count = facts.get("device_count") or {}
    name = facts.get("privateuse1")
    if not name or name == "privateuseone" or not count.get("ok") or count.get("repr") != "0":
        return []
    message = (f"The {name!r} device is registered, but torch.{name}.device_count() answers 0: this machine "
               f"has no {name} device")
    vendor = facts.get("torch_fl") or {}
    nvidia = vendor.get("is_nvidia_cuda_available") or {}
    libcuda = vendor.get("libcuda") or {}
    built = (vendor.get("build_accelerator") or {}).get("repr")
    why = []
    if built:
        why.append(f"torch_fl was built for ACCELERATOR={built.strip(chr(39))}")
    if libcuda.get("ok") and libcuda.get("repr") == "False":
        why.append("no CUDA driver (libcuda) can be loaded")
    elif nvidia.get("ok") and nvidia.get("repr") == "False":
        why.append("the CUDA driver finds no NVIDIA GPU")
    if why:
        message += f" ({'; '.join(why)})"
    return [make_finding("no-device", "error", f"torch.{name}", message + ".",
                     [e["seq"] for e in document.get("events", []) if e["probe"] == "PrivateUse1 backend name"][:1])]


def drop_covered_hazards(found: list[dict]) -> list[dict]:
    """A latent hazard whose read a stale-guard finding already names is said once, there."""
    stale = {seq for f in found if f["kind"] == "stale-guard" for seq in f["events"]}
    return [f for f in found if f["kind"] != "latent-hazard" or not (set(f["events"][1:]) & stale)]


def fold_into_no_device(found: list[dict], document: dict) -> list[dict]:
    """With a ``no-device`` finding, the exercise failures and a Triton driver that no backend
    would create are its consequences: listed in it, not findings of their own."""
    device = next((f for f in found if f["kind"] == "no-device"), None)
    if device is None:
        return found
    consequences, kept = [], []
    by_seq = {e["seq"]: e for e in document.get("events", [])}
    for finding in found:
        if finding["kind"] == "exercise-failed":
            consequences.append(finding["message"].rstrip("."))
        elif finding["kind"] == "triton-driver" and "0 Triton backends" in finding["message"]:
            event = by_seq.get(finding["events"][0]) if finding["events"] else None
            if event is None:
                kept.append(finding)
                continue
            answers = ", ".join(f"{k}: {v}" for k, v in (event.get("is_active") or {}).items())
            raised = f"; creating it raised {first_line(event['raised'], 120)}" if event.get("raised") else ""
            consequences.append(f"Triton has no driver ({label(event['where'])} line {event['where'].get('line')} "
                                f"created it; no backend is active: {answers}{raised})")
            device["events"] = sorted(set(device["events"] + finding["events"]))
        else:
            kept.append(finding)
    if consequences:
        device["message"] += " Because of it: " + "; ".join(consequences) + "."
    device["message"] += " Nothing can run on this device here: survey on a machine that has one."
    return kept


def vendor_branch(run: Run) -> list[dict]:
    """Which torch_fl vendor branch set GEMS_VENDOR, and why."""
    document, facts = run.document, run.facts
    if "torch_fl" not in facts:
        return []
    # (a write by C code, setenv, is seen at a step's end with no writer: its file is None)
    writes = [e for e in document.get("events", []) if e["probe"] == "$GEMS_VENDOR" and e["kind"] == "write"
              and (e["where"].get("file") or "").startswith("torch_fl/")]
    env = (facts.get("env") or {}).get("GEMS_VENDOR") or {}
    if not writes:
        if env.get("original"):
            return [make_finding("vendor-branch", "info", "$GEMS_VENDOR",
                             f"GEMS_VENDOR was {env['original']!r} before torch_fl was imported; torch_fl's vendor "
                             "branches only set it when unset (setdefault), so the value given wins.", [])]
        return []
    write = writes[0]
    value = (write.get("value") or {}).get("repr", "").strip("'")
    branch = TORCH_FL_BRANCHES.get(value, f"GEMS_VENDOR={value!r}")
    vendor = facts["torch_fl"]
    nvidia = vendor.get("is_nvidia_cuda_available") or {}
    libcuda = vendor.get("libcuda") or {}
    message = (f"torch_fl set GEMS_VENDOR={value!r} in {label(write['where'])} (line {write['where'].get('line')}): "
               f"its {branch} branch")
    if value == "ascend" and nvidia.get("ok") and nvidia.get("repr") == "False":
        cause = "no CUDA driver (libcuda) can be loaded" if libcuda.get("repr") == "False" else "the CUDA driver sees no GPU"
        message += (f", because nothing had set GEMS_VENDOR and its NVIDIA branch found no NVIDIA GPU "
                    f"(is_nvidia_cuda_available() answers False: {cause})")
    elif value == "nvidia" and nvidia.get("repr") == "True":
        message += ", because its NVIDIA branch found an NVIDIA GPU (is_nvidia_cuda_available() answers True)"
    return [make_finding("vendor-branch", "info", "$GEMS_VENDOR", message + ".", [write["seq"]])]
