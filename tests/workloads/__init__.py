"""The benchmark worker (gputui.workloads): PyTorch and TensorFlow models, the measurement loop, data-parallel runs."""
