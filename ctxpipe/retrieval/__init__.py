"""ctxpipe.retrieval"""
