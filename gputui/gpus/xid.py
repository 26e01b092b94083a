"""What an XID means: NVIDIA's XID catalogue in short, each code's usual culprit, and what
to do about it.  Shared by the telemetry (which watches for XIDs), the diagnosis (which
names them in findings) and the check (which grades them)."""

from __future__ import annotations

# What to do, by the usual culprit of an XID.
PROGRAM, RESET, REPLACE = "program", "reset", "replace"
ADVICE = {
    PROGRAM: (
        "Usually the program, not the machine: run it again with CUDA_LAUNCH_BLOCKING=1 or under "
        "compute-sanitizer to find the faulting kernel. If code that works elsewhere triggers it, treat the "
        "GPU as suspect and ask for another machine."
    ),
    RESET: (
        "The GPU needs a reset (nvidia-smi -r, root on the host) or the machine a reboot before it can be "
        "trusted: ask the provider, or move to another machine. If it comes back after the reset, the GPU "
        "needs replacing."
    ),
    REPLACE: (
        "A hardware fault: stop using this machine and ask the provider for another, quoting the XID and the time; the GPU or its board may need replacing."
    ),
}
UNKNOWN_ADVICE = "Look the XID up in NVIDIA's catalogue (docs.nvidia.com/deploy/xid-errors) and send it to the provider with the time."
SEVERITY = {PROGRAM: 1, RESET: 2, REPLACE: 3}

# The common XIDs: their usual meaning and culprit (NVIDIA's XID catalogue, in short).
XID_MEANINGS: dict[int, tuple[str, str]] = {
    13: ("graphics engine exception: usually an out-of-range access or illegal instruction in the program", PROGRAM),
    31: ("GPU memory page fault: the program touched memory it does not own", PROGRAM),
    43: ("GPU stopped processing: a program's kernel faulted and was stopped; the GPU is usually fine", PROGRAM),
    45: ("preemptive cleanup: the driver stopped a program's work, usually after an earlier error or a kill", PROGRAM),
    48: ("double-bit ECC error: an uncorrectable GPU memory error", RESET),
    61: ("internal micro-controller breakpoint/warning: GPU firmware trouble", RESET),
    62: ("internal micro-controller halt: GPU firmware stopped", RESET),
    63: ("ECC page retirement or row remapping recorded: memory was repaired, a reset applies it", RESET),
    64: ("ECC page retirement or row remapping failed: GPU memory could not be repaired", REPLACE),
    68: ("video decoder (NVDEC) exception: usually the program or its input", PROGRAM),
    74: ("NVLink error: a link between GPUs failed, multi-GPU communication fails or slows", REPLACE),
    79: ("GPU has fallen off the bus: the host can no longer reach it (power, PCIe or hardware fault)", REPLACE),
    92: ("high single-bit ECC error rate: GPU memory is wearing out", REPLACE),
    94: ("contained ECC error: an uncorrectable memory error stopped one program, others continue", RESET),
    95: ("uncontained ECC error: an uncorrectable memory error affected every program on the GPU", RESET),
    119: ("GSP RPC timeout: the GPU's system processor (firmware) stopped answering the driver", RESET),
    120: ("GSP error: the GPU's system processor firmware failed", RESET),
    154: ("GPU recovery action changed: the driver says this GPU needs a reset, reboot or drain", RESET),
}


def xid_meaning(xid: int) -> str:
    known = XID_MEANINGS.get(xid)
    return known[0] if known else "not in gputui's table of common XIDs"
