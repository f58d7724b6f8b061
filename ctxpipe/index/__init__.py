"""ctxpipe.index: the index replica (PostgreSQL + pgvector) kept in step with the ContextFS.

chunker       DocumentChunker: L0/L1/L2 → token-bounded chunks with their source message ids
span_splitter a text → chunk spans of at most N tokens, measured by token offsets
prep_pool     PrepPool: chunking and line splitting of a batch in spawned processes
replica       ReplicaStore: the replica's SQL (set-based upserts, binary COPY of chunks)
memory_replica MemoryReplica: the same rows in memory (benches without PostgreSQL, tests)
indexer       Indexer: converge the replica rows of some URIs to the FS (one transaction)
worker        IndexWorker: claim → group → index → mark; IndexBatchResult
repair        RepairJob: FS vs replica → events for missing / stale / orphaned rows
reindex       rebuild the replica from the FS
status        the `ctxpipe status` snapshot
wiring        build all of the above from the application's adapters (IndexAdapters)

The outbox the workers claim from is `ctxpipe.storage.outbox_store.OutboxStore` (a storage
adapter the commit path appends to). Submodules are imported explicitly (nothing here), so
importing one does not pull in the chunker or the model.
"""
