"""gputui: run GPU training benchmarks and see, live, what holds them back."""

__version__ = "0.1.0"
