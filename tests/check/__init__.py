"""gputui check (gputui.check): preflight, micro-benchmarks, the pipeline stage, XIDs and the orchestrator."""
