"""Why an output is missing from the report, in words, from what happened to the component that writes it.

Every section says what it cannot show (a component that failed, did not run, or wrote nothing; an output that
could not be read) with `absent`, never by raising.
"""

from __future__ import annotations

from components.report.facts import RunFacts
from components.report.page import Missing


def component_state(facts: RunFacts, component: str) -> str | None:
    """The component's state in this run (`complete`, `cached`, `failed`, ...), None when it did not start."""
    for step in facts.timeline:
        if step["component"] == component:
            return str(step.get("status"))
    return None


def absent(facts: RunFacts, component: str, what: str) -> Missing:
    """Why `what` is missing, from what happened to `component`."""
    state = component_state(facts, component)
    if state == "failed":
        return Missing(f"No {what}: {component} failed in this run.")
    # An output that could not be read says why, whatever the timeline knows (the RunReport component has none).
    problems = [
        problem
        for problem in (*facts.summary.get("problems", []), *facts.problems)
        if problem.get("component") == component
    ]
    if problems:
        return Missing(f"No {what}: {problems[0]['error']} ({problems[0].get('path', '')})")
    if state is None and "components" in facts.not_available:  # no timeline: only the inputs are known
        return Missing(f"No {what}: {component} did not run in this pipeline (the RunReport got no output of it).")
    if state is None:
        return Missing(f"No {what}: {component} did not run (the run stopped before it).")
    return Missing(f"No {what}: {component} wrote none.")
