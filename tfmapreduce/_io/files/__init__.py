"""Files read and written on the workers, one module per concern: the public ``Files`` source,
input splits, the readers of each format (text, CSV, .npy, raw, TFRecord), encoders and the
tf.data pipeline that streams a split in batches.
"""
