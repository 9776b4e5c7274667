"""What keyed kinds share: the map side that emits keys, the keyed plan (reducers and buckets, and the forecast of
what its budget expects: in memory or spilled), keyed resident results and the fetched ``KeyedResult``.
"""
