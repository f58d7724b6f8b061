"""ctxpipe.retrieval: the read path — hybrid find, hierarchical search, token-budgeted
build_context, recall statistics."""

from ctxpipe.retrieval.budget import BudgetAllocator, BudgetProfile, TokenBudget
from ctxpipe.retrieval.config import RetrievalConfig
from ctxpipe.retrieval.context_builder import ContextBuilder
from ctxpipe.retrieval.context_models import ContextRequest, ContextResult, ContextSection
from ctxpipe.retrieval.engine import ReadPath
from ctxpipe.retrieval.find import HybridFinder
from ctxpipe.retrieval.models import FindFilters, FindHit, FindResult, SearchResult

__all__ = [
    "BudgetAllocator",
    "BudgetProfile",
    "ContextBuilder",
    "ContextRequest",
    "ContextResult",
    "ContextSection",
    "FindFilters",
    "FindHit",
    "FindResult",
    "HybridFinder",
    "ReadPath",
    "RetrievalConfig",
    "SearchResult",
    "TokenBudget",
]
