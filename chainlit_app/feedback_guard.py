"""Feedback on a chat message is its owner's: Chainlit's ``PUT /feedback`` and ``DELETE /feedback`` check no owner.

Chainlit upserts a feedback by the ids the client sends, so a logged-in user who learned the id of another
user's message (or of a feedback on it) could write, overwrite or delete feedback there. The two routes are
replaced by the same handlers behind an ownership check: the message, and the feedback being replaced or
deleted, must be in one of the caller's own threads; otherwise the answer is 404, the same as for an id that
does not exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from chainlit import server
from chainlit.types import DeleteFeedbackRequest, UpdateFeedbackRequest
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

StepOwner = Callable[[str], Awaitable[str | None]]
FeedbackOwner = Callable[[str], Awaitable[str | None]]


def guard_feedback_routes(router: APIRouter, *, step_owner: StepOwner, feedback_owner: FeedbackOwner) -> None:
    """Replace Chainlit's feedback routes on its ``router`` (``chainlit.server.router``, which its app serves)
    with ones that check the caller owns the message."""

    async def update_feedback(
        request: Request, update: UpdateFeedbackRequest, current_user: server.UserParam
    ) -> JSONResponse:
        user = current_user.identifier
        feedback_id = update.feedback.id
        if await step_owner(update.feedback.forId) != user or (
            feedback_id and await feedback_owner(feedback_id) not in (None, user)
        ):
            raise HTTPException(status_code=404, detail="no such message")
        response: JSONResponse = await server.update_feedback(request, update, current_user)
        return response

    async def delete_feedback(
        request: Request, payload: DeleteFeedbackRequest, current_user: server.UserParam
    ) -> JSONResponse:
        if await feedback_owner(payload.feedbackId) != current_user.identifier:
            raise HTTPException(status_code=404, detail="no such feedback")
        response: JSONResponse = await server.delete_feedback(request, payload, current_user)
        return response

    handlers = {"PUT": update_feedback, "DELETE": delete_feedback}
    replaced = 0
    for i, route in enumerate(router.routes):
        if isinstance(route, APIRoute) and route.path.endswith("/feedback") and len(route.methods) == 1:
            (method,) = route.methods
            if method in handlers:
                router.routes[i] = APIRoute(route.path, handlers[method], methods=[method])
                replaced += 1
    if replaced != len(handlers):  # a Chainlit upgrade moved them: refuse to start unguarded
        raise RuntimeError(f"found {replaced} of Chainlit's 2 feedback routes to guard; check the Chainlit version")
