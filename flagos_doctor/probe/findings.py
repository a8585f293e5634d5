"""Findings: what the probe's events mean, in words a torch_fl developer recognises.

A pure function of the document (:func:`judge`); each finding has ``kind``, ``severity``
(error | warning | info), ``probe``, ``message`` and ``events`` (the evidence, by ``seq``).
Only error-level findings (and crashes, timeouts) make the command exit 1.
"""

from __future__ import annotations

from flagos_doctor.probe import causes, hazards
from flagos_doctor.probe.finding import SEVERITIES, Run, first_line, label, make_finding, skipped_words


def _package(where: dict) -> str | None:
    """The first part of ``where``'s file; None for a write with no known writer (no file)."""
    if not where.get("file"):
        return None
    return where["file"].replace("\\", "/").split("/", 1)[0]


def _function(phase: str) -> str:
    return phase.rsplit(":", 1)[-1] if ":" in phase else phase


def judge(document: dict) -> list[dict]:
    """All findings of a probe document (or an explain run's), errors first: every rule of
    :data:`RULES` on the run, then the folds that say a finding once."""
    run = Run(document)
    found = [finding for rule in RULES for finding in run.once(rule)]
    found = _fold(found, document)
    found.sort(key=lambda f: SEVERITIES.index(f["severity"]))
    return found


def _fold(found, document) -> list[dict]:
    """Findings said once: a hazard a stale guard names, failures a missing device explains."""
    return hazards.fold_into_no_device(hazards.drop_covered_hazards(_drop_explained_drivers(found)), document)


def _drop_explained_drivers(found: list[dict]) -> list[dict]:
    """A Triton driver chosen from a redirected answer, whose failure a failure-cause finding
    names (its evidence holds the driver's creation), is said once, there."""
    explained = {seq for f in found if f["kind"] == "failure-cause" for seq in f["events"]}
    return [f for f in found if f["kind"] != "triton-driver" or not f["events"] or f["events"][0] not in explained
            or "Triton backends answered" in f["message"]]


def _explained(run: Run) -> dict:
    """Each failed import and exercise step -> the causes :mod:`.causes` finds for it."""
    explained = {}
    for outcome in run.document.get("outcomes", []):
        if outcome.get("ok"):  # (the probe's steps are imports and exercises; explain records none)
            continue
        failure = {"step": outcome["step"], "error": outcome.get("error"),
                   "traceback": outcome.get("traceback") or [], "causes": outcome.get("causes") or []}
        explained[outcome["step"]] = causes.find_causes(run.events, failure, run.decisions)
    return explained


def _failure_causes(run: Run) -> list[dict]:
    """``failure-cause``: a failed step's traceback passed a read of a redirected probe whose
    original answers differently, or used what a stale guard's branch skipped (a chain).
    Listed first: it says why the failures below happened."""
    return [make_finding("failure-cause", "error", cause["probe"], cause["message"], cause["events"])
            for found in run.once(_explained).values() for cause in found]


def _pointer(found: list[dict]) -> str:
    """What the failure findings say of the cause: the failure-cause finding, or none found."""
    if not found:
        return " " + causes.no_cause({})
    named = "; ".join(f"{c['probe']} read at {c['reader']['file']}:{c['reader']['line']} (events "
                      + ", ".join(f"#{e}" for e in c["events"]) + ")" for c in found)
    return f" Cause: see the failure-cause finding ({named})."


def _import_failed(run: Run) -> list[dict]:
    document, explained = run.document, run.once(_explained)
    out = []
    for outcome in document.get("outcomes", []):
        if outcome["step"].startswith("import ") and not outcome["ok"]:
            at = ""
            frames = outcome.get("traceback") or []
            if frames:
                last = frames[-1]
                at = f" (raised in {last['file']}:{last['function']}, line {last['line']})"
            seqs = [e["seq"] for e in document.get("events", []) if e.get("step") == outcome["step"]][-3:]
            out.append(make_finding("import-failed", "error", None,
                                f"{outcome['step']} failed: {first_line(outcome.get('error'))}{at}."
                                + _causes(outcome.get("causes") or []) + _pointer(explained[outcome["step"]]), seqs))
    return out


def _causes(causes: list[dict]) -> str:
    """`` Caused by: OSError: libfoo.so ... (raised in ...).``, root cause last."""
    parts = []
    for cause in causes:
        at = cause.get("at")
        where = f" (raised in {at['file']}:{at['function']}, line {at['line']})" if at else ""
        parts.append(f"{first_line(cause['error'], 200)}{where}")
    return f" Caused by: {' <- '.join(parts)}." if parts else ""


def _interrupted(run: Run) -> list[dict]:
    document = run.document
    info = document.get("interrupted")
    if not info:
        return []
    kind = "timeout" if document.get("outcome") == "timeout" else "crash"
    last = info.get("last_event")
    tail = f" The last event was #{last['seq']}: {last['kind']} of {last['probe']} by {label(last['where'])}." if last else ""
    message = (
        f"The child {'did not finish' if kind == 'timeout' else 'died'} ({info['reason']}) during "
        f"phase {info.get('phase') or 'start-up'!r}.{tail} Events up to that moment are kept; "
        "see the stderr tail."
    )
    return [make_finding(kind, "error", None, message, [last["seq"]] if last else [])]


def _stale_guards(run: Run) -> list[dict]:
    """Stack code read a probe after the same stack had redirected it."""
    events, by_seq, probes, saved, document = run.events, run.by_seq, run.probes, run.saved, run.document
    out = []
    for read in events:
        if read["kind"] != "read" or not read.get("saw") or read["probe"] in {s["probe"] for s in document.get("saved_originals", [])}:
            continue
        write = by_seq.get(read["saw"])
        if write is None or write["kind"] != "write":
            continue
        reader, writer = read["where"], write["where"]
        # a write with no known writer has no file: no package, so never the reader's own stack
        if _package(reader) is None or _package(reader) != _package(writer):
            continue
        if (reader.get("file"), reader.get("function")) == (writer.get("file"), writer.get("function")):
            continue
        probe = probes.get(read["probe"], {})
        keep = saved.get(read["probe"])
        now, before = probe.get("call") or {}, probe.get("original_call") or {}
        answers_differ = bool(now) and bool(before) and now.get("repr") != before.get("repr")
        if keep is None and not answers_differ:
            continue  # a redirect the stack means to use (torch.device in its own kernels), not a guard
        value = read.get("value") or {}
        seen = f"the redirected probe ({value.get('defined_at') or value.get('repr')})"
        answer = ""
        final = probe.get("final") or {}
        if probe.get("call", {}).get("ok") and final.get("defined_at") == (read.get("value") or {}).get("defined_at"):
            answer = f", which answers {probe['call']['repr']}"
        guard = _function(read["phase"])
        called_from = f" (in {guard})" if guard not in (reader.get("function"), read["phase"]) else ""
        consequence = _guard_branch(read, guard, events, document)
        message = (
            f"{label(reader)}{called_from} read {read['probe']} at line {reader['line']} after "
            f"{label(writer)} (line {writer['line']}) had redirected it; it saw {seen}{answer}{consequence}."
        )
        evidence = [write["seq"], read["seq"]]
        if keep is not None:
            message += f" The original is saved as {keep['probe']} (#{keep['seq']})" + (
                "; read that instead." if not keep.get("read") else "."
            )
            evidence.append(keep["seq"])
        out.append(make_finding("stale-guard", "error", read["probe"], message, evidence))
    return out


def _guard_branch(read, guard, events, document) -> str:
    """What the guard did after the read, as it happened: raised (naming the exception that
    failed the step), took or skipped the branch its ``if`` tests, or wrote nothing more."""
    where = read["where"]
    for outcome in document.get("outcomes", []):
        if outcome.get("ok") or outcome["step"] != read.get("step"):
            continue
        frames = outcome.get("traceback") or []
        if any(f.get("file") == where.get("file") and f.get("function") == str(where.get("function")).rsplit(".", 1)[-1]
               for f in frames):
            return f"; then it raised {first_line(outcome.get('error'), 200)}, which failed {outcome['step']}"
    decision = next((d.get("decision") or {} for d in (document.get("facts") or {}).get("decisions") or []
                     if (d["probe"], d["file"], d["line"]) == (read["probe"], where.get("file"), where.get("line"))), {})
    if decision.get("kind") == "branch" and decision.get("now"):
        test = f"`{decision['statement']}` (line {decision['statement_line']})"
        # A reader that returns the answer (``return torch.cuda.is_available()``) hands the
        # branch to its caller, the guard.
        through = decision.get("through")
        caller = guard if ":" in (read.get("phase") or "") else f"its caller (line {(through or {}).get('line')})"
        who = f"{caller}, given that answer," if through else "it"
        if decision["now"].startswith("no branch"):
            return f"; so {who} skipped the branch of {test}"
        skipped = skipped_words(decision.get("skipped"))
        if "`return" in decision["now"]:
            return f"; so {who} took the branch of {test} and returned ({decision['now']})" + (
                f": {skipped}" if skipped else "")
        return f"; so {who} took the branch of {test} into {decision['now']}"
    later = [e for e in events if e["seq"] > read["seq"] and e.get("phase") == read["phase"] and e["kind"] in ("write", "delete")]
    if not later and ":" in read["phase"]:
        return f"; {guard} wrote no watched probe after that"
    return ""


#: The device whose cuda alias is torch_fl's contract.
TORCH_FL_DEVICE = "flagos"


def _alias_missing(run: Run) -> list[dict]:
    """The cuda alias is torch_fl's contract: judged for its ``flagos`` device, or for a stack
    that declares one (``FLAGOS_ALIAS_CUDA`` set to 1/on/true), never for any other device."""
    stale, events, facts = run.once(_stale_guards), run.events, run.facts
    name = facts.get("privateuse1")
    if name != TORCH_FL_DEVICE and not facts.get("alias_declared"):
        return []
    native = facts.get("native_cuda_available") or {}
    maps = facts.get("cuda_maps_to") or {}
    if not name or name == "privateuseone" or not native.get("ok") or native.get("repr") != "False":
        return []
    if facts.get("alias_turned_off") or not maps or (maps.get("ok") and maps.get("repr") == repr(name)):
        return []
    gives = f"gives {maps['repr']}" if maps.get("ok") else f"raises {maps.get('repr')}"
    message = (
        f'torch.device("cuda") {gives}, not {name!r}: {name} is registered, this machine has no CUDA '
        f"runtime (torch.cuda's original is_available() answers False) and FLAGOS_ALIAS_CUDA does not "
        "turn the alias off, yet the cuda -> " + name + " alias was never installed."
    )
    guards = [f for f in stale if f["probe"] == "torch.cuda.is_available"]
    if guards:
        message += " Likely cause: the stale-guard finding on torch.cuda.is_available."
    evidence = [e for f in guards for e in f["events"]]
    evidence += [e["seq"] for e in events if e["probe"] == "PrivateUse1 backend name"][:1]
    return [make_finding("alias-missing", "error", "torch.device", message, evidence)]


def _triton(run: Run) -> list[dict]:
    document, events = run.document, run.events
    out = []
    facts = document.get("facts") or {}
    native = (facts.get("native_cuda_available") or {}).get("repr")
    for event in events:
        if not event.get("creates_driver"):
            continue
        active = event.get("active_backends") or []
        answers = ", ".join(f"{k}: {v}" for k, v in (event.get("is_active") or {}).items())
        who = f"{label(event['where'])} (line {event['where'].get('line')})"
        raised = f" Creating it raised {first_line(event['raised'], 200)}." if event.get("raised") else ""
        if len(active) != 1:
            out.append(make_finding("triton-driver", "error", "triton.runtime.driver.active",
                                f"{who} first read triton.runtime.driver.active, and {len(active)} Triton backends "
                                f"answered is_active() ({answers}): Triton needs exactly one, so it has no driver.{raised}",
                                [event["seq"]]))
        elif active == ["nvidia"] and native == "False":
            redirect = [e for e in events if e["probe"] == "torch.cuda.is_available" and e["kind"] == "write" and e["seq"] < event["seq"]]
            because = f" (redirected by {label(redirect[-1]['where'])}, line {redirect[-1]['where'].get('line')})" if redirect else ""
            out.append(make_finding("triton-driver", "error" if raised else "warning", "triton.runtime.driver.active",
                                f"{who} first read triton.runtime.driver.active; Triton chose NVIDIA's driver because "
                                "torch.cuda.is_available answered True"
                                f"{because}, but this machine has no CUDA runtime (the original answers False)"
                                + (f"; the driver does not match the device {facts['privateuse1']!r}."
                                   if facts.get("privateuse1") not in (None, "privateuseone") else ".") + raised,
                                [event["seq"]] + [e["seq"] for e in redirect[-1:]]))
    return out


def _orphans(run: Run) -> list[dict]:
    document, by_seq = run.document, run.by_seq
    if not document.get("final_state"):
        return []  # a crashed child may not have reached the reader yet
    out = []
    for keep in document.get("saved_originals", []):
        if keep["read"]:
            continue
        write = by_seq.get(keep["seq"], {})
        where = write.get("where")
        out.append(make_finding(
            "orphan-original", "warning", keep["saves"],
            f"{label(where)} (line {(where or {}).get('line')}) saved the original {keep['saves']} as "
            f"{keep['probe']}, but nothing read it afterwards.",
            [keep["seq"]],
        ))
    return out


def _writes(probe, events) -> list[dict]:
    return [e for e in events if e["probe"] == probe["name"] and e["kind"] in ("write", "delete")]


def _restored(probe, events) -> bool:
    """Written more than once, and back to its original value at the end."""
    return probe.get("kind") in ("attr", "env") and probe.get("original") is True and len(_writes(probe, events)) >= 2


def _patched_and_restored(run: Run) -> list[dict]:
    """A patch undone before the end (a context manager, a mock): worth knowing, not a hazard."""
    document, events = run.document, run.events
    out = []
    for probe in document.get("probes", []):
        if not _restored(probe, events):
            continue
        writes = _writes(probe, events)
        lines: dict[str, list] = {}
        for event in writes:
            lines.setdefault(label(event["where"]), [])
            if event["where"].get("line") and event["where"]["line"] not in lines[label(event["where"])]:
                lines[label(event["where"])].append(event["where"]["line"])
        who = [f"{name} (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at))})" if at else name
               for name, at in lines.items()]
        steps = sorted({e.get("phase") or e.get("step") for e in writes})
        message = (f"{probe['name']} was patched and restored by {', '.join(who)} "
                   f"({len(writes)} writes, during {', '.join(steps)}); its final value is the original.")
        out.append(make_finding("patched-and-restored", "info", probe["name"], message, [e["seq"] for e in writes]))
    return out


def _multiple_writers(run: Run) -> list[dict]:
    document, events = run.document, run.events
    out = []
    for probe in document.get("probes", []):
        if _restored(probe, events) or probe.get("kind") == "saved":
            continue  # _patched_and_restored says it; a saved original is set, read back, deleted
        writes = [e for e in events if e["probe"] == probe["name"] and e["kind"] in ("write", "delete")]
        writers = []
        for event in writes:
            key = (event["where"].get("file"), event["where"].get("function"))
            if key not in [(w["where"].get("file"), w["where"].get("function")) for w in writers]:
                writers.append(event)
        if len(writers) < 2:
            continue
        values = {(e.get("value") or {}).get("repr") for e in writes}
        chain = " -> ".join(f"{label(e['where'])}" + (f" (line {e['where']['line']})" if e["where"].get("line") else "") for e in writers)
        # (the runner always gives "final", None when absent at the end; a probe without the key
        # says nothing of the end: the last write's value)
        final = probe["final"] if "final" in probe else writes[-1].get("value")
        wins = f"the last one wins: {final['repr']}" if final else "at the end it is absent"
        severity = "info" if len(values) == 1 else "warning"
        message = f"{probe['name']} was written by {len(writers)} writers: {chain}; {wins}."
        if len(values) == 1:
            message += " They all wrote the same value."
        out.append(make_finding("multiple-writers", severity, probe["name"], message, [e["seq"] for e in writes]))
    return out


def _disagreements(run: Run) -> list[dict]:
    probes, stale = run.probes, run.once(_stale_guards)
    out = []
    stale_probes = {f["probe"] for f in stale}
    for probe in probes.values():
        now, before = probe.get("call"), probe.get("original_call")
        if not now or not before or now["repr"] == before["repr"]:
            continue
        where = (probe.get("final") or {}).get("defined_at")

        def says(call):
            return f"answers {call['repr']}" if call["ok"] else f"raises {call['repr']}"

        message = (
            f"{probe['name']} now {says(now)} ({where}) while its original {says(before)}: code that "
            "means the native question gets the redirected answer."
        )
        severity = "warning" if probe["name"] in stale_probes else "info"
        out.append(make_finding("probe-disagreement", severity, probe["name"], message, probe.get("write_events", [])[-1:]))
    return out


def _exercise_failed(run: Run) -> list[dict]:
    document, explained = run.document, run.once(_explained)
    facts = document.get("facts") or {}
    no_device = (facts.get("privateuse1") in (None, "privateuseone")
                 and (facts.get("native_cuda_available") or {}).get("repr") == "False")
    severity = "info" if no_device else "warning"  # nothing to exercise on this machine
    out = []
    for outcome in document.get("outcomes", []):
        if outcome["step"].startswith("exercise") and not outcome["ok"]:
            frames = outcome.get("traceback") or []
            at = f" (raised in {frames[-1]['file']}:{frames[-1]['function']}, line {frames[-1]['line']})" if frames else ""
            out.append(make_finding("exercise-failed", severity, None,
                                    f"{outcome['step'][len('exercise: '):]} failed: {first_line(outcome.get('error'))}{at}."
                                    + _pointer(explained[outcome["step"]]),
                                    [e for c in explained[outcome["step"]] for e in c["events"]]))
    return out


#: Every finding rule, in the order their findings are listed (before the sort by severity).
#: One signature (``rule(run) -> list[finding]``, :class:`~flagos_doctor.probe.finding.Run`);
#: the probe and explain both run this list through :func:`judge`. A new rule is one function
#: and one line here.
RULES = (
    _failure_causes, _import_failed, _interrupted, _stale_guards, _alias_missing, _triton, _orphans,
    _patched_and_restored, _multiple_writers, _disagreements, _exercise_failed,
    hazards.latent_hazards, hazards.no_device, hazards.vendor_branch,
)
