"""ctxpipe.extraction"""
