def fibonacci(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):

    return a


if __name__ == "__main__":
    print([fibonacci(i) for i in range(10)])
