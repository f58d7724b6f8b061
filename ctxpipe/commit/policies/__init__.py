"""ctxpipe.commit.policies"""
