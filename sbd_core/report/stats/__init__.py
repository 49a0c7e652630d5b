"""The report's statistics: intervals of single estimates and design effects (:mod:`.estimates`), the one verdict
procedure for a run against the NTP arm (:mod:`.verdicts`), and the per-problem pairing with that arm that fills the
summary's interval columns (:mod:`.intervals`). Method: docs/statistics.md.
"""
