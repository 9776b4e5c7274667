"""What keyed kinds share: the map side that emits keys, the keyed plan (reducers and buckets),
keyed resident results and the fetched ``KeyedResult``.
"""
