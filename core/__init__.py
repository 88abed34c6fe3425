"""The lowest layer: plain data types, text analysis and text helpers that every other package may import.

Why a package of its own: retrieval (loading, chunking, search) and persistence (catalog, keyword index,
vector store) both need the chunk types and the keyword analyzer; kept in retrieval, persistence imported
retrieval while retrieval imported persistence. Nothing here imports another package of the project.
"""
