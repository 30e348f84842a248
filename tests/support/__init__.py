"""Helpers the tests share: free ports, the collector served in-process, the speed job as
a process, polling. Plain functions and classes, imported by tests and conftests alike;
fixtures stay in the conftests of the folders that use them."""
