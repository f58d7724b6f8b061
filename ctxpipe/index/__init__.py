"""ctxpipe.index"""
