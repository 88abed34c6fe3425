"""Language models of the engine: the embedded local server, the chat-model factory and structured
output. Nothing loads a model at import time.
"""
