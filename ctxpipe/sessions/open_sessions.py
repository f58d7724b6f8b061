"""OpenSessions: append messages to a session that stays open; commits are cut from it.

An append stores the new messages (a message id the session holds is not appended again)
and, in the same transaction, cuts a commit whenever the open part reaches
`CTXPIPE_SESSION_MAX_MESSAGES` messages or `CTXPIPE_SESSION_MAX_TOKENS` tokens; a close cuts
what is open, and so does the idle sweep (`cut_idle`, a beat job) for a session untouched for
`CTXPIPE_SESSION_IDLE_COMMIT_S`. Each cut is then submitted through the commit submit path
(the service's dispatcher: the ledger and the Celery pipeline) and marked submitted. A cut
whose submit was lost (a crash, the broker down) keeps its derived commit id and is submitted
again by `resubmit` (every sweep, and before each close): the ledger keeps one commit per id,
so each message ends up in exactly one commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ctxpipe.client.session_models import SessionAppended
from ctxpipe.commit.big_messages import keep_bounded
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import LimitsConfig, Message, RequestContext
from ctxpipe.sessions.rules import BY_CLOSE, BY_IDLE, CutRules
from ctxpipe.sessions.store import Appended, NewMessage, OpenSessionStore

log = logging.getLogger(__name__)

Submit = Callable[[CommitRequest], str]
Count = Callable[[str], int]
OwnerCheck = Callable[[RequestContext], object]

# a cut not marked submitted this long after it was made is submitted again by the sweep
RESUBMIT_AFTER_S = 30.0


class OpenSessions:
    def __init__(
        self,
        store: OpenSessionStore,
        rules: CutRules,
        submit: Submit,
        count_tokens: Count,
        limits: LimitsConfig | None = None,
        owner_check: OwnerCheck | None = None,
    ) -> None:
        self.store = store
        self.rules = rules
        self._submit = submit
        self._count = count_tokens
        self._limits = limits or LimitsConfig()
        self._owner_check = owner_check

    # ------------------------------------------------------------------ appends
    def append(
        self, ctx: RequestContext, messages: list[Message], *, close: bool = False
    ) -> SessionAppended:
        """Append `messages` (in their order) to `ctx`'s open session; cut and submit the
        commits the rules call for (and, with `close`, one of whatever is left open)."""
        ids = [m.id for m in messages]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"duplicate message id {dup!r} in one append")
        if self._owner_check is not None:  # the FS's owner of the session, before anything
            self._owner_check(ctx)
        kept = keep_bounded(messages, self._limits.max_message_keep_chars)
        window = self._limits.max_message_chars
        batch = [NewMessage(message=m, tokens=self._count(m.content[:window])) for m in kept]
        done = self.store.append(ctx, batch, self.rules)
        submitted = self._submit_all(done.cuts)
        if close:
            closed = self.close(ctx)
            submitted += closed.commit_ids
            done = done.model_copy(update={"open_messages": 0, "open_tokens": 0})
        return self._result(ctx, done, submitted)

    def close(self, ctx: RequestContext) -> SessionAppended:
        """Cut and submit the session's open part now (nothing when nothing is open)."""
        self.resubmit()
        commit_id = self.store.cut(ctx, BY_CLOSE)
        cuts = [commit_id] if commit_id is not None else []
        return self._result(ctx, Appended(), self._submit_all(cuts))

    def cut_idle(self, limit: int = 100) -> list[str]:
        """The beat job: submit the cuts left unsubmitted, then cut every session idle for
        `CTXPIPE_SESSION_IDLE_COMMIT_S`; returns the commit ids submitted."""
        done = self.resubmit()
        for account, session in self.store.idle(self.rules.idle_s, limit):
            # the owner is the session's; the store checks idleness again under the row lock
            probe = RequestContext(
                account_id=account, user_id="idle", agent_id="idle", session_id=session
            )
            commit_id = self.store.cut(probe, BY_IDLE, idle_s=self.rules.idle_s)
            if commit_id is not None:
                done += self._submit_all([commit_id])
        return done

    def resubmit(self, older_than_s: float = RESUBMIT_AFTER_S, limit: int = 100) -> list[str]:
        """Submit again the cuts made `older_than_s` ago or more and never marked submitted
        (their submit was lost); the ledger dedups a commit id it already holds."""
        return self._submit_all(self.store.unsubmitted(older_than_s, limit))

    # ------------------------------------------------------------------ internals
    def _submit_all(self, commit_ids: list[str]) -> list[str]:
        """Submit each cut in order. A cut whose submit fails (broker down, back-pressure)
        stays recorded and unsubmitted: the sweep submits it again, so the append that cut it
        still succeeds (its messages are stored) and the failure is only logged."""
        for commit_id in commit_ids:
            try:
                self.submit_cut(commit_id)
            except Exception as exc:  # noqa: BLE001 - the cut is durable; `resubmit` retries it
                log.warning("open session cut %s not submitted yet: %s", commit_id, exc)
        return commit_ids

    def submit_cut(self, commit_id: str) -> None:
        """Submit one cut (its messages, in order, as the commit `commit_id`), then mark it."""
        cut = self.store.get_cut(commit_id)
        if cut is None:
            raise KeyError(f"no such cut: {commit_id}")
        ctx = RequestContext(
            account_id=cut.account_id,
            user_id=cut.user_id,
            agent_id=cut.agent_id,
            session_id=cut.session_id,
        )
        self._submit(CommitRequest(commit_id=commit_id, ctx=ctx, messages=cut.messages))
        self.store.mark_submitted(commit_id)

    def _result(self, ctx: RequestContext, done: Appended, cuts: list[str]) -> SessionAppended:
        return SessionAppended(
            session_id=ctx.session_id,
            appended=done.appended,
            duplicates=done.duplicates,
            commit_ids=cuts,
            open_messages=done.open_messages,
            open_tokens=done.open_tokens,
        )


__all__ = ["RESUBMIT_AFTER_S", "OpenSessions"]
