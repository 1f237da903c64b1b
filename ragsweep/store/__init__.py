"""The results database: runs, their per-question results and leaderboards, stored test sets
(every edit kept), people's notes on runs, and what earlier runs tell a new one. Imports the
layers below it (up to ``sweep``)."""
