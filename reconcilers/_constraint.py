"""Compose a Slurm job's ``constraints`` with one required feature (pure; Slinky slurm-bridge
1.3 ``internal/utils/slurmconstraint/slurmconstraint.go``).

Slurm's feature grammar (slurmctld ``job_scheduler.c`` ``_feature_string2list``) has no
nesting: parentheses do not nest, there is at most one set of square brackets and never
inside parentheses, a ``*count`` outside brackets is only valid when it is the only feature,
and without parentheses the operators are applied left to right. So "the job's expression AND
feature ``f``" is not always writable:

* empty, or exactly ``f`` ⇒ ``f``;
* no ``|`` outside parentheses and brackets ⇒ ``f&<expr>`` (every top-level operator is AND);
* a top-level ``|`` in a flat expression ⇒ ``f&(<expr>)``;
* a top-level ``|`` beside parentheses or brackets ⇒ refused (the grouping would nest);
* a ``*count`` outside brackets ⇒ refused (the count must move into brackets);
* nested parentheses, brackets inside parentheses, two bracket sets, unbalanced ``()``/``[]``
  ⇒ refused (Slurm would refuse them anyway).

The composer does not validate the expression further; Slurm stays the judge.
"""

from __future__ import annotations


class ConstraintError(ValueError):
    """The constraint expression cannot be combined with the required feature; the message
    names the expression and how to rewrite it."""


def compose(required: str, constraints: str) -> str:
    """``constraints`` AND ``required`` in Slurm's grammar (rules: module docstring).

    Raises:
        ConstraintError: an expression Slurm cannot combine with another feature.
    """
    expr = constraints.strip()
    if not expr or expr == required:
        return required
    top_or = parens = brackets = count_outside = False
    depth_p = depth_b = 0
    for c in expr:
        if c == "(":
            parens = True
            depth_p += 1
            if depth_p > 1:
                raise ConstraintError(
                    f"constraint {expr!r}: Slurm does not allow nested parentheses"
                )
        elif c == ")":
            depth_p -= 1
            if depth_p < 0:
                raise ConstraintError(f"constraint {expr!r}: unbalanced parentheses")
        elif c == "[":
            if depth_p:
                raise ConstraintError(
                    f"constraint {expr!r}: Slurm does not allow brackets inside parentheses"
                )
            if brackets:
                raise ConstraintError(f"constraint {expr!r}: Slurm allows only one set of brackets")
            brackets = True
            depth_b += 1
        elif c == "]":
            depth_b -= 1
            if depth_b < 0:
                raise ConstraintError(f"constraint {expr!r}: unbalanced brackets")
        elif c == "|":
            if not depth_p and not depth_b:
                top_or = True
        elif c == "*" and not depth_b:
            count_outside = True
    if depth_p:
        raise ConstraintError(f"constraint {expr!r}: unbalanced parentheses")
    if depth_b:
        raise ConstraintError(f"constraint {expr!r}: unbalanced brackets")
    if count_outside:
        raise ConstraintError(
            f"constraint {expr!r}: a feature count outside square brackets cannot be combined "
            f"with the required feature {required!r}; move the count into brackets, e.g. "
            f"[{required}*N&{expr}]"
        )
    if not top_or:
        return f"{required}&{expr}"
    if parens or brackets:
        raise ConstraintError(
            f"constraint {expr!r}: an OR outside parentheses cannot be combined with the "
            f"required feature {required!r} when the expression also groups with parentheses "
            "or brackets (Slurm does not nest groups); rewrite it with one level of grouping, "
            "e.g. (a&b)|c as [a&b|c] or a&(b|c)"
        )
    return f"{required}&({expr})"
