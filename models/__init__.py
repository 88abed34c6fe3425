"""Language models of the engine: the embedded local server, the chat-model factory and structured output.

Nothing here loads a model at import time: the embedded server starts on the first `chat_model()` call for
the `local` provider.
"""
