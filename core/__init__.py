"""The lowest layer: plain data types, text analysis and text helpers that every other package may
import. Nothing here imports another package of the project.
"""
