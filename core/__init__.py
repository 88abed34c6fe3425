"""The lowest layer: plain data types, text analysis and text helpers that every other package may
import. Nothing here imports another package of the project: retrieval and persistence both need the chunk
types and the keyword analyzer, and each would otherwise import the other.
"""
