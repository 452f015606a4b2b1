"""When will a waiting job start, and what would make it start now (issue 35, docs/eta.md).

* :mod:`~quotaplane.eta.holds`: the observed hold-time distributions of a partition (by queue, by user);
* :mod:`~quotaplane.eta.copy`: a working copy of a partition, on which the engines run forward or try
  a change;
* :mod:`~quotaplane.eta.forecast`: the p10/p50/p90 start of every waiting ask, with its basis
  (:mod:`~quotaplane.eta.tracker`: cached per partition);
* :mod:`~quotaplane.eta.explain`: the smallest changes that would admit a request now, each verified.
"""

from quotaplane.eta.explain import Explanation, LimitRaise, Release, explain, explain_ask
from quotaplane.eta.forecast import QUANTILES, AskEta, Forecast, forecast
from quotaplane.eta.holds import MIN_BASIS, HoldEstimate, HoldSketch, HoldTimes
from quotaplane.eta.tracker import EtaTracker, tracker

__all__ = ["MIN_BASIS", "QUANTILES", "AskEta", "EtaTracker", "Explanation", "Forecast", "HoldEstimate",
           "HoldSketch", "HoldTimes", "LimitRaise", "Release", "explain", "explain_ask", "forecast",
           "tracker"]
