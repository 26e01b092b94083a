"""``gputui tune``: short trials of the user's own command over its training DataLoader's
settings, and a verdict that holds up to noise."""

from gputui.tune.settings import LoaderSettings
from gputui.tune.trial import Trial, TrialPlan, run_trial
from gputui.tune.verdict import Verdict, decide

__all__ = ["LoaderSettings", "Trial", "TrialPlan", "Verdict", "decide", "run_trial"]
