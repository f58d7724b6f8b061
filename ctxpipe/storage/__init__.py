"""ctxpipe.storage"""
