"""Reading the log back: the replay, explain and tail engines and their rendering
(DESIGN §1, §7).
"""
