"""ctxpipe.fs"""
