"""ctxpipe.retrieval: the read path — hybrid find, hierarchical search, token-budgeted
build_context, recall statistics.

`read_path` wires it (`ReadPath`, which takes the client's typed requests: `FindRequest`,
`SearchRequest`, `ContextRequest`); `find/` the hybrid finder and its SQL candidate store;
`units/` the lines and sentences find ranks; `search/` intent analysis and hierarchical
retrieval; `context/` build_context; `config` the knobs (`Settings.retrieval`).
"""

from ctxpipe.client.find_request import FindRequest
from ctxpipe.client.search_request import SearchRequest
from ctxpipe.retrieval.config import RetrievalConfig
from ctxpipe.retrieval.context.budget_allocator import BudgetAllocator, BudgetProfile, TokenBudget
from ctxpipe.retrieval.context.context_builder import ContextBuilder
from ctxpipe.retrieval.context.context_request import ContextRequest, ContextResult, ContextSection
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
from ctxpipe.retrieval.models import FindFilters, FindHit, FindResult, SearchResult
from ctxpipe.retrieval.read_path import ReadPath

__all__ = [
    "BudgetAllocator",
    "BudgetProfile",
    "ContextBuilder",
    "ContextRequest",
    "ContextResult",
    "ContextSection",
    "FindFilters",
    "FindHit",
    "FindRequest",
    "FindResult",
    "HybridFinder",
    "ReadPath",
    "RetrievalConfig",
    "SearchRequest",
    "SearchResult",
    "TokenBudget",
]
