"""`rag feedback ANSWER_ID --up|--down [--comment TEXT]`: rate a recorded answer (persistence.feedback); an
answer of another tenant is "no answer" (exit 2), as an id that does not exist.
"""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import console, fail, print_json, settings_or_exit, text_or_exit, user_errors


def feedback(
    answer_id: Annotated[
        str, typer.Argument(help="The answer's id (rag ask prints it; the API's answer_id).")
    ],
    up: Annotated[bool, typer.Option("--up", help="The answer helped (thumbs up).")] = False,
    down: Annotated[bool, typer.Option("--down", help="The answer did not help (thumbs down).")] = False,
    comment: Annotated[str, typer.Option(help="Why (at most 2000 characters).")] = "",
    tenant: Annotated[
        str | None, typer.Option(help="Tenant of the answer (default RAG_DEFAULT_TENANT).")
    ] = None,
    user: Annotated[str | None, typer.Option(help="Who rates (default RAG_DEFAULT_USER).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored feedback as JSON.")] = False,
) -> None:
    """Rate a recorded answer thumbs up or down, with an optional comment; `rag stats` counts the ratings."""
    from persistence.feedback import rate_answer

    if up == down:
        fail("give exactly one of --up or --down")
    text_or_exit(answer_id, "the answer id")
    text_or_exit(comment, "--comment")
    settings = settings_or_exit()
    with user_errors():
        stored = rate_answer(
            answer_id,
            "up" if up else "down",
            tenant=tenant or settings.default_tenant,
            comment=comment,
            user_id=settings.default_user if user is None else user,
            settings=settings,
        )
    if as_json:
        print_json(stored.as_dict())
        return
    replaced = f" (replaces {stored.replaced})" if stored.replaced else ""
    console.print(f"answer {stored.answer_id} rated {stored.rating}{replaced}", highlight=False)
