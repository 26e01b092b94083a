"""gputui fleet (gputui.fleet): the report over many nodes, and real ssh and Slurm clusters."""
