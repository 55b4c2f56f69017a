"""The shipped release and the one before it, as the record tables name them: one place for their
versions and record folders, read by the README's numbers, the model card, the docs' tables and
docs/speed.md's guide."""

# the shipped en_small release and its records from a clean checkout of its ship commit
SHIPPED = "0.10.0"
RELEASE = f"results/en_small/{SHIPPED}"
# the run that made it: the candidate's evaluations and downstream reports
CANDIDATE = "results/campaign-fourth/candidate"
# the release before it, quoted beside it
PREVIOUS = "0.9.0"
PREVIOUS_RELEASE = f"results/en_small/{PREVIOUS}"
