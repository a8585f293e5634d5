"""What a case costs to compile and autotune on a cold cache, known before any survey ran.

Parent side, standard library only. A survey's wall time ends with its long poles: on an
H200 with empty caches FlagGems compiles and autotunes ``mm`` for 40 s and more a case
(22 configurations of its matmul kernel per dtype, each compiled, then timed), and a first
survey, with no earlier run to give timing hints (:mod:`.history`), started them last, so
that 15 workers waited on them at the end and the ``mm`` cases compiled side by side.

:data:`COLD_COST` is shipped: per *family* (the op name before the first ``.``, as
:func:`flagos_doctor.survey.schedule.family`), the seconds a case took on the cold H200
survey of FlagGems 5.0.2 (``surveys/results/flag_gems-5.0.2-h200.json``, its mean over the
family's cases, where that mean is 2 s or more), and the FlagGems tuned-configuration
lists its kernels autotune over with their lengths. ``tests/test_compile_cost.py`` keeps the
lengths current against the installed flag_gems (a kernel that gains configurations
costs more) and fails when a list of 20 configurations or more is in no family here and
not among :data:`CHEAP_LONG_LISTS` (measured cheap).

Used only for order (what a case computes never changes): :func:`predicted` gives a case
with no timing hint its family's cold cost, so
:func:`flagos_doctor.survey.history.slow_first` starts the compile-heavy families first.
That two workers never compile the same kernel at once is the workers' own rule
(:mod:`flagos_doctor.survey.child.compile_lock`), per compilation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flagos_doctor.survey.schedule import family


@dataclass(frozen=True)
class Cost:
    seconds: float  # a case of the family on the cold H200 survey (mean)
    configs: dict = field(default_factory=dict)  # FlagGems tuned-config key -> how many configurations
    note: str = ""


#: family -> its cold cost. Seconds: surveys/results/flag_gems-5.0.2-h200.json (harness 5,
#: 16 workers on one H200, empty caches); configs: flag_gems 5.0.2's runtime.get_tuned_config.
COLD_COST = {
    "mm": Cost(41.8, {"mm": 22, "mm_self_transpose": 73}),
    "_conv_depthwise2d": Cost(21.2),
    "_weight_norm_interface_backward": Cost(16.1, {"weight_norm_kernel_last": 45, "weight_norm_kernel_first": 45}),
    "conv1d": Cost(14.2, {"conv2d_forward": 20}),
    "conv2d": Cost(13.6, {"conv2d_forward": 20}),
    "kron": Cost(12.7, {"kron": 24}),
    "_weight_norm_interface": Cost(12.1, {"weight_norm_kernel_last": 45, "weight_norm_kernel_first": 45}),
    "_upsample_bicubic2d_aa": Cost(8.7, {"upsample_bicubic2d_aa": 16}),
    "native_layer_norm_backward": Cost(7.2, {"layer_norm_backward": 12}),
    "max_pool2d_with_indices": Cost(5.0),
    "randperm": Cost(5.0, {"randperm": 3}),
    "bmm": Cost(4.2, {"bmm": 12}),
    "avg_pool2d": Cost(4.1),
    "mv": Cost(3.9, {"mv": 48}),
    "baddbmm": Cost(3.8, {"baddbmm": 12}),
    "_unique2": Cost(2.9),
    "conv3d": Cost(2.8, {"conv3d_forward": 11}),
    "avg_pool2d_backward": Cost(2.8),
    "addmm": Cost(2.5, {"addmm": 8}),
    "addmv": Cost(2.2, {"mv": 48}),
    "sort": Cost(2.2),
    # Not among flag_gems' own routes: torch_fl's confs route it; the 464-route survey of
    # branch-2.9's conf (issue 23) timed it out beside mm, whose kernels it waits on.
    "_euclidean_dist": Cost(41.8, {"mm": 22}, "torch_fl routes; as mm"),
}


#: FlagGems tuned-configuration lists of 20 or more whose families cost under 2 s a case on
#: the same cold H200 survey (their pruning or heuristics leave few configurations to
#: compile): key -> (configurations in flag_gems 5.0.2, what was measured). Kept so that
#: the table's test can tell a new long list from one known to be cheap.
CHEAP_LONG_LISTS = {
    "attention": (132, "_flash_attention_forward: 0.0 s a case (UNVERIFIABLE, never on the device)"),
    "weight_norm_kernel": (60, "no case of the H200 survey measured it"),
    "argmin_split_k": (32, "argmin: 0.12 s a case"),
    "var_mean": (24, "var_mean: 0.15 s a case"),
    "nonzero": (24, "nonzero: 0.88 s a case"),
    "masked_select": (20, "masked_select: 0.22 s a case"),
}


def predicted(task: tuple) -> float:
    """The cold seconds of ``task`` ((overload, profiles or None)): its family's cost a case
    (a whole overload counts as one case: its profiles are not known yet); 0 when none."""
    name, profiles = task
    cost = COLD_COST.get(family(name))
    if cost is None:
        return 0.0
    return cost.seconds * (len(profiles) if profiles is not None else 1)
