"""CandidateDeduplicator: a cascade from cheap to expensive checks.

1. a candidate planned earlier in the same commit that says the same thing;
2. an existing node at the routed URI (identical content → skip);
3. vector prefilter over the index replica (same account, owner and category) and over the
   nodes beside the routed URI that the replica has not caught up with yet (written by an
   earlier commit, their upsert still in the outbox: read from the FS, scored alike): below
   `similarity_threshold` → create, at or above `llm_decision_max` → merge (skip when the
   category is not mergeable);
4. the LLM's create/skip/merge decision, when enabled, only for the band in between.
If the index is unreachable the decision degrades to CREATE and says why.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np

from ctxpipe.commit.policies.base import MERGEABLE, PlanContext, candidate_patch, dated_patch
from ctxpipe.core.config import DedupConfig
from ctxpipe.core.enums import DedupDecision, WriteAction
from ctxpipe.core.errors import CtxError
from ctxpipe.core.llm_schemas import DedupDecisionOutput
from ctxpipe.core.models import CandidateMemory, ContextNode, DedupResult, content_hash
from ctxpipe.core.text import similarity
from ctxpipe.core.uri import CtxURI, slugify
from ctxpipe.fs import ContextFS
from ctxpipe.providers.base import Embedder, VectorHit, VectorIndex

log = logging.getLogger(__name__)
IN_COMMIT_THRESHOLD = 0.9  # core.text.similarity: rapidfuzz token-sort ratio
NON_MERGEABLE_SKIP = 0.95


class CandidateDeduplicator:
    def __init__(
        self,
        fs: ContextFS,
        config: DedupConfig,
        embedder: Embedder | None = None,
        vector_index: VectorIndex | None = None,
    ) -> None:
        self._fs = fs
        self._config = config
        self._embedder = embedder
        self._index = vector_index
        self._down: str | None = None  # set after the first index failure of this plan
        self._vectors: dict[str, list[float]] = {}
        self._has_rows: dict[tuple[str, str, str], bool] = {}
        self._lagging: dict[str, list[str]] = {}  # URI prefix -> nodes not indexed yet

    @staticmethod
    def _filters(c: CandidateMemory, uri: str) -> dict[str, str]:
        owner = CtxURI.parse(uri)
        return {
            "account_id": owner.account,
            "owner_space": f"{owner.scope}/{owner.segments[0]}",
            "category": c.category.value,
        }

    async def _owner_has_rows(self, f: dict[str, str]) -> bool:
        key = (f["account_id"], f["owner_space"], f["category"])
        if key not in self._has_rows:
            probe = getattr(self._index, "has_rows", None)
            self._has_rows[key] = True if probe is None else await probe(*key)
        return self._has_rows[key]

    async def _unindexed(self, f: dict[str, str], uri: str) -> list[str]:
        """The nodes beside `uri` (same owner and category) that the replica has not caught up
        with: written to the FS by an earlier commit, their upsert still in the outbox."""
        prefix = uri.rsplit("/", 1)[0] + "/"
        if prefix not in self._lagging:
            probe = getattr(self._index, "unindexed", None)
            self._lagging[prefix] = [] if probe is None else await probe(f["account_id"], prefix)
        return self._lagging[prefix]

    async def _lagging_hits(
        self, vector: list[float], uris: list[str], seen: set[str]
    ) -> list[VectorHit]:
        """Those nodes scored like the replica scores its rows: cosine of their L0 line."""
        nodes = [n for u in uris if u not in seen and (n := self.read(u)) is not None]
        texts = [n.abstract for n in nodes if n.abstract and n.abstract not in self._vectors]
        if texts and self._embedder is not None:
            texts = list(dict.fromkeys(texts))
            embedded = await self._embedder.embed_texts(texts)
            self._vectors.update(zip(texts, (e.dense_vector for e in embedded), strict=True))
        q = np.asarray(vector, dtype=np.float32)
        out: list[VectorHit] = []
        for n in nodes:
            v = self._vectors.get(n.abstract)
            if v is None:
                continue
            d = np.asarray(v, dtype=np.float32)
            score = min(1.0, float(q @ d / ((np.linalg.norm(q) * np.linalg.norm(d)) or 1.0)))
            out.append(VectorHit(uri=n.uri, score=score, level=0, abstract=n.abstract))
        return out

    async def prime(self, items: list[tuple[CandidateMemory, str]]) -> None:
        """Embed, in one batch, every candidate that will need the vector prefilter (only
        those whose owner already has indexed memories of that category)."""
        if self._embedder is None or self._index is None or self._down is not None:
            return
        texts: list[str] = []
        try:
            for c, uri in items:
                if c.abstract not in self._vectors and await self._owner_has_rows(
                    self._filters(c, uri)
                ):
                    texts.append(c.abstract)
            if texts:
                vectors = await self._embedder.embed_texts(list(dict.fromkeys(texts)))
                self._vectors.update(
                    zip(dict.fromkeys(texts), (v.dense_vector for v in vectors), strict=True)
                )
        except Exception as exc:  # noqa: BLE001 - check() reports the degradation
            self._down = " ".join(str(exc).split())[:200] or type(exc).__name__

    def read(self, uri: str) -> ContextNode | None:
        try:
            return self._fs.read_node(uri) if self._fs.stat_node(uri).version > 0 else None
        except CtxError:
            return None

    async def check(self, c: CandidateMemory, uri: str, pc: PlanContext) -> DedupResult:
        mergeable = c.category in MERGEABLE
        # 1. same commit
        for target, plan in pc.pending.items():
            if plan.category != c.category or plan.action is WriteAction.SKIP:
                continue
            sim = similarity(c.abstract, plan.node_patch.get("abstract", ""))
            keys = set(slugify(c.routing_key).split("-"))
            if not keys & set(CtxURI.parse(target).name.split("-")):
                continue  # different topics that merely share a sentence
            if sim >= IN_COMMIT_THRESHOLD:
                decision = DedupDecision.MERGE_EXISTING if mergeable else DedupDecision.SKIP
                return DedupResult(
                    decision=decision,
                    merge_target=target,
                    score=sim,
                    reason=f"near-duplicate of {target} planned in this commit (overlap {sim:.2f})",
                )
        # 2. routed URI
        existing = self.read(uri)
        if existing is not None:
            patch = dated_patch(c, candidate_patch(c))
            if existing.content_hash == content_hash(
                patch["abstract"], patch["overview"], patch["content"]
            ):
                return DedupResult(
                    decision=DedupDecision.SKIP,
                    merge_target=uri,
                    score=1.0,
                    reason="identical content already stored at the routed URI",
                )
            if mergeable:
                return DedupResult(
                    decision=DedupDecision.MERGE_EXISTING,
                    merge_target=uri,
                    reason="a node already exists at the routed URI",
                )
        # 3. vector prefilter
        if self._embedder is None or self._index is None:
            return DedupResult(
                decision=DedupDecision.CREATE,
                reason="no vector index configured; created without prefilter",
            )
        if self._down is not None:
            return DedupResult(
                decision=DedupDecision.CREATE,
                reason=f"index unreachable, degraded to create ({self._down})",
            )
        filters = self._filters(c, uri)
        try:
            lagging = [u for u in await self._unindexed(filters, uri) if u != uri]
            indexed = await self._owner_has_rows(filters)
            if not indexed and not lagging:
                return DedupResult(
                    decision=DedupDecision.CREATE,
                    reason=f"no indexed {c.category.value} memory for this owner yet",
                )
            vector = self._vectors.get(c.abstract)
            if vector is None:
                vector = (await self._embedder.embed_texts([c.abstract]))[0].dense_vector
            hits = []
            if indexed:
                hits = await asyncio.wait_for(
                    self._index.search(vector, filters, top_k=self._config.dedup_top_k, level=0),
                    timeout=10,
                )
            hits = sorted(
                [*hits, *await self._lagging_hits(vector, lagging, {h.uri for h in hits})],
                key=lambda h: -h.score,
            )
        except Exception as exc:  # noqa: BLE001 - any index failure degrades, loudly
            log.warning("dedup prefilter unavailable: %s", exc)
            self._down = " ".join(str(exc).split())[:200] or type(exc).__name__
            return DedupResult(
                decision=DedupDecision.CREATE,
                reason=f"index unreachable, degraded to create ({exc})"[:300],
            )
        hits = [h for h in hits if self.read(h.uri) is not None]
        if not hits or hits[0].score < self._config.similarity_threshold:
            best = f"{hits[0].score:.2f}" if hits else "none"
            return DedupResult(
                decision=DedupDecision.CREATE,
                reason=f"no similar memory (best score {best} < "
                f"{self._config.similarity_threshold:.2f})",
            )
        top = hits[0]
        if top.score >= self._config.llm_decision_max:
            return DedupResult(
                decision=DedupDecision.MERGE_EXISTING if mergeable else DedupDecision.SKIP,
                merge_target=top.uri,
                score=top.score,
                reason=f"vector similarity {top.score:.2f} >= "
                f"{self._config.llm_decision_max:.2f}: decided without the LLM",
            )
        # 4. LLM decision, only for what the prefilter cannot decide
        if not self._config.enable_llm_decision:
            if mergeable:
                return DedupResult(
                    decision=DedupDecision.MERGE_EXISTING,
                    merge_target=top.uri,
                    score=top.score,
                    reason=f"vector similarity {top.score:.2f} over threshold",
                )
            if top.score > NON_MERGEABLE_SKIP:
                return DedupResult(
                    decision=DedupDecision.SKIP,
                    merge_target=top.uri,
                    score=top.score,
                    reason=f"near-identical ({top.score:.2f}) non-mergeable memory",
                )
            return DedupResult(
                decision=DedupDecision.CREATE,
                score=top.score,
                reason=f"similar ({top.score:.2f}) but {c.category.value} is not mergeable",
            )
        node = self.read(top.uri)
        assert node is not None
        out = await pc.llm.complete_json(
            "policy.dedup_decision",
            {
                "category": c.category.value,
                "candidate_abstract": c.abstract,
                "candidate_content": c.content,
                "existing_abstract": node.abstract,
                "existing_content": node.content,
                "similarity": float(top.score),
            },
            DedupDecisionOutput,
            ctx=pc.ctx,
            usage=pc.usage,
        )
        decision = out.decision
        if decision is DedupDecision.MERGE_EXISTING and not mergeable:
            decision = DedupDecision.CREATE
        return DedupResult(
            decision=decision,
            merge_target=top.uri if decision is not DedupDecision.CREATE else None,
            score=top.score,
            reason=f"LLM decision at similarity {top.score:.2f}: {out.reason}",
        )
