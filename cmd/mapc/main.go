// Command mapc compiles Kubernetes mutation policies into MutatingAdmissionPolicy objects.
package main

func main() {}
