"""ctxpipe.commit"""
