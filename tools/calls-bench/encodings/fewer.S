# sap's plain `fib` (no inlining) in the fewest instructions: the same checks as the
# code generator's (a depth budget in the first argument, the error flag returned in rdx
# and tested after each call, the overflow of `+`), 29 instructions per call.
# (rdi = depth budget, rsi = n) -> (rax = fib(n), rdx = 0), or rdx = 1 on a failure.
    .text
    .globl fib_fewer
    .p2align 4
fib_fewer:
    push %rbp
    mov %rsp,%rbp
    push %r13
    push %r12
    push %rbx
    test %rdi,%rdi
    je 9f
    cmp $2,%rsi
    jl 8f
    mov %rdi,%r13
    mov %rsi,%r12
    lea -1(%r13),%rdi
    lea -1(%r12),%rsi
    call fib_fewer
    test %rdx,%rdx
    jne 9f
    mov %rax,%rbx
    lea -1(%r13),%rdi
    lea -2(%r12),%rsi
    call fib_fewer
    test %rdx,%rdx
    jne 9f
    add %rbx,%rax
    jo 9f
    xor %edx,%edx
    pop %rbx
    pop %r12
    pop %r13
    pop %rbp
    ret
8:  mov %rsi,%rax
    xor %edx,%edx
    pop %rbx
    pop %r12
    pop %r13
    pop %rbp
    ret
9:  mov $1,%edx
    pop %rbx
    pop %r12
    pop %r13
    pop %rbp
    ret
    .section .note.GNU-stack,"",@progbits
