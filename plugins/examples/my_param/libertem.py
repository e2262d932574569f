# LiberTEM's documentation, docs/source/udf/basic.rst ("Declaring a constructor"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/my_param/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

class MyParamUDF(UDF):
    '''
    This UDF demonstrates how to define a constructor for a UDF.

    Parameters
    ----------
    my_param
        A parameter that is passed into the UDF for demonstration purposes.
        It is mirrored in the `demo` result buffer.
    '''
    def __init__(self, my_param=None):
        # Assigning a default parameter works,
        # provided the UDF accepts it in subsequent calls
        # exactly as it passed it to the superclass:
        if my_param is None:
            my_param = "Eins, zwei drei!"

        # !!!DON'T!!! self.my_param = my_param
        # !!!DON'T!!! super().__init__()
        # We have to pass it to the superclass constructor instead.
        # This makes sure it will be available via self.params and
        # on clean copies.

        # !!!DON'T!!! super().__init__(other_param=my_param)
        # This would trigger a TypeError when
        # MyParamUDF(other_param=my_param) is called for a clean copy.

        # DO pass all parameters to the superclass exactly as this
        # class would accept them
        super().__init__(my_param=my_param)

    # The rest of this UDF just mirrors the parameter
    # back in a result buffer for demonstration.

    def get_result_buffers(self):
        '''
        Declare a result buffer for the parameter
        '''
        return {
            'demo': self.buffer(
                kind='single',
                dtype=object
            ),
        }

    def process_frame(self, frame):
        '''
        We assign the parameter to the result buffer
        '''
        self.results.demo[:] = self.params.my_param

    def merge(self, dest, src):
        '''
        We pass through the result buffer
        '''
        dest.demo[:] = src.demo
