"""OpenAI-compatible conversations: which stored conversation a request belongs to
(DESIGN.md §11). How the message list the client sent is then reconciled with it is in
service/conversation/reconcile.py; what a turn records, in service/conversation/plan.py.

**Which conversation** (`locate`, before the turn), in order: `X-Session-Key`; the
client's own conversation id (`X-OpenWebUI-Chat-Id`, `metadata.conversation_id`) → the
key `oai:<client>:<hash of the id>`; else the list is matched against the caller's
stored conversations (core/conversation.py names every prefix by one hash):

1. A list with no assistant message (a chat's first request) continues nothing: it
   starts a new conversation. Two chats that both open with "hi" are two conversations;
   the answer the first one got is what tells them apart afterwards.
2. A stored conversation whose newest message is the list's last assistant message, or a
   later message of the list, is continued (the deepest such; the most recently active
   among equals).
3. Else the conversation holding the longest prefix of the list that reaches its last
   assistant message: the list re-sends an earlier state of it (a regenerate or an edit).
4. Else a new conversation: `oai:chat:<uuid>`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from sessiongate.config import Settings
from sessiongate.config.openai import OpenAIConfig
from sessiongate.core.conversation import ClientMessage, Identity, match_candidates
from sessiongate.core.keys import KeyRef
from sessiongate.core.users import Caller
from sessiongate.models.base import ReplyModel
from sessiongate.service.conversation.reconcile import Reconciler
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.client_reply import StatelessReplies
from sessiongate.store.conversations import ConversationIndex


def derived_key(client: str, conversation_id: str) -> str:
    """The key of a client's own conversation id: `oai:<client>:<32 hex digits>`."""
    digest = hashlib.sha256(conversation_id.encode("utf-8", "replace")).hexdigest()[:32]
    return f"oai:{client}:{digest}"


class ConversationService:
    def __init__(
        self,
        sessions: SessionService,
        index: ConversationIndex,
        config: OpenAIConfig,
        stateless: StatelessReplies,
    ) -> None:
        self.sessions = sessions
        self.index = index
        self.config = config
        #: One-shot replies: stateless agents and task requests (nothing kept).
        self.stateless = stateless
        #: How the list continues the key's conversation, with what comes before the
        #: turn's own user message written (the caller holds the key's lock).
        self.prepare = Reconciler(sessions, index, config).prepare

    def new_key(self) -> str:
        return f"oai:chat:{self.sessions.ids.new()}"

    async def erase(self, ref: KeyRef) -> None:
        """The key was erased: its nodes go too."""
        await self.index.erase(ref)

    async def identify(
        self,
        caller: Caller,
        messages: Sequence[ClientMessage],
        hashes: Sequence[str],
        *,
        session_key: str | None = None,
        client_id: tuple[str, str] | None = None,
    ) -> tuple[str, Identity]:
        """The request's key and how it was found: `X-Session-Key`, the client's own
        conversation id (`(client, id)`), else the list (`locate`)."""
        if session_key:
            return session_key, Identity.KEY
        if client_id is not None:
            return derived_key(*client_id), Identity.CLIENT_ID
        return await self.locate(caller, messages, hashes)

    async def locate(
        self, caller: Caller, messages: Sequence[ClientMessage], hashes: Sequence[str]
    ) -> tuple[str, Identity]:
        """The key a list with no key and no client id belongs to (rules 1-4 above)."""
        candidates = match_candidates(hashes, messages)
        if not candidates:
            return self.new_key(), Identity.NEW
        head, node = await self.index.find(caller.name, candidates)
        if head is not None:
            return head.key.name, Identity.MATCHED
        if node is not None:
            return node.key.name, Identity.MATCHED
        return self.new_key(), Identity.NEW


def build_conversation_service(
    settings: Settings, sessions: SessionService, models: Mapping[str, ReplyModel]
) -> ConversationService:
    """The conversation index beside the session store's rows (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    store = sessions.store
    index: ConversationIndex
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.conversations import SQLiteConversationIndex

        index = SQLiteConversationIndex(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.conversations import PostgresConversationIndex
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no conversation index for {type(store).__name__}")
        index = PostgresConversationIndex(store)
    stateless = StatelessReplies(models, settings.limits.max_reply_chars)
    service = ConversationService(sessions, index, settings.openai, stateless)
    sessions.on_erase(service.erase)
    return service
