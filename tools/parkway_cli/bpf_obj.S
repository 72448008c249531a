/* bpf_obj.S -- embeds the compiled scheduler (PARKWAY_BPF_OBJ, set by
 * tools/tools.mk) so `parkway` is one self-contained binary. */
	.section .rodata
	.balign 8
	.global parkway_bpf_obj
parkway_bpf_obj:
	.incbin PARKWAY_BPF_OBJ
	.global parkway_bpf_obj_end
parkway_bpf_obj_end:
	.section .note.GNU-stack,"",@progbits
