"""The honest answers given when retrieval finds nothing to answer from."""

NOT_FOUND_ANSWER_EN = "I could not find anything about this in the indexed documents."
NOT_FOUND_ANSWER_ZH = "在已索引的文档中没有找到与此相关的内容。"
#: The store's own error is not part of the answer (it goes to the server's log; persistence.errors).
STORE_DOWN_ANSWER_EN = "The document store could not be searched right now, so I cannot answer from it."
STORE_DOWN_ANSWER_ZH = "目前无法检索文档库，因此无法根据文档回答。"
