"""The find / build_context playground: the same service calls as `POST /v1/find` and
`POST /v1/context`, with the hits' scores, units, cited turns and dates, and the context's
text with the tokens of each section."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from ctxpipe.api.routes.deps import service
from ctxpipe.api.ui.render import PREFIX, UiRoute, page
from ctxpipe.api.ui.visitor import Visitor, visitor
from ctxpipe.client.find_request import FindRequest
from ctxpipe.retrieval import ContextResult, FindResult
from ctxpipe.service import ContextEngineService

router = APIRouter(prefix=PREFIX, route_class=UiRoute, include_in_schema=False)
Svc = Annotated[ContextEngineService, Depends(service)]
Who = Annotated[Visitor, Depends(visitor)]


@router.get("/find")
def playground(
    request: Request,
    who: Who,
    svc: Svc,
    q: Annotated[str, Query(max_length=8000)] = "",
    mode: Literal["find", "context"] = "find",
    top_k: Annotated[int, Query(ge=1, le=200)] = 10,
    budget: Annotated[int, Query(ge=50, le=100_000)] = 500,
    as_of: Annotated[str, Query(max_length=32)] = "",  # the form sends "" for none
) -> Response:
    found: FindResult | None = None
    built: ContextResult | None = None
    if q:
        if mode == "find":
            req = FindRequest.model_validate({"query": q, "top_k": top_k, "as_of": as_of})
            found = svc.find(req, who.ctx)
        else:
            built = svc.build_context(
                q, who.ctx, [], budget, incremental=False, as_of=as_of or None
            )
    return page(
        request,
        "find.html",
        who,
        q=q,
        mode=mode,
        top_k=top_k,
        budget=budget,
        as_of=as_of,
        found=found,
        built=built,
    )
