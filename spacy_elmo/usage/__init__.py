"""Word usages: every use of target words in a corpus as vectors, the biLM's substitutes, semantic
change between two corpora, and senses induced from substitutes.

``usages`` collects the uses and their vectors, ``substitutes`` reads the head's softmax at each
token, ``change`` scores change (PRT, APD, JSD) and ``ranking`` scores those against a gold
standard, ``senses`` clusters a word's uses into senses, ``clustering`` holds the clustering and the
measures.
"""
